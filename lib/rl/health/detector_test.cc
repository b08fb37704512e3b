#include "rl/health/detector.h"

#include <gtest/gtest.h>

namespace rl::health {
namespace {

Received Beat(const std::string& role, const std::string& phase, uint64_t progress, uint64_t pid = 100) {
  Received r;
  r.routing = "conn-" + role;
  r.hb.role = role;
  r.hb.id = "0";
  r.hb.pid = pid;
  r.hb.phase = phase;
  r.hb.interval_ms = 1000;
  r.hb.started_ms = static_cast<int64_t>(pid);
  if (progress) r.hb.counters["rows"] = progress;
  return r;
}

std::vector<std::string> Events(const std::vector<Detection>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(d.event);
  return out;
}

using Strings = std::vector<std::string>;

// Heartbeats r every second from `from` to `to` (inclusive), ticking after each; the detections
// other than "joined".
std::vector<Detection> Beats(Membership* m, const Received& r, int64_t from, int64_t to) {
  std::vector<Detection> out;
  for (int64_t t = from; t <= to; t += 1000) {
    for (auto& d : m->OnHeartbeat(r, t)) {
      if (d.event != "joined") out.push_back(d);
    }
    for (auto& d : m->Tick(t)) out.push_back(d);
  }
  return out;
}

TEST(MembershipTest, FirstHeartbeatJoinsAndALeavingOneLeaves) {
  Membership m({});
  Received stranger = Beat("rollout", "stopped", 1, 99);
  stranger.hb.leaving = true;
  EXPECT_TRUE(m.OnHeartbeat(stranger, 0).empty()) << "a goodbye from an unknown process says nothing";
  EXPECT_EQ(Events(m.OnHeartbeat(Beat("rollout", "generate", 1), 0)), Strings{"joined"});
  Received last = Beat("rollout", "generate", 1);
  last.hb.leaving = true;
  EXPECT_EQ(Events(m.OnHeartbeat(last, 500)), Strings{"left"});
  EXPECT_TRUE(m.Tick(100000).empty()) << "a role that left is never suspect";
}

TEST(MembershipTest, ThreeMissedHeartbeatsMakeSuspectAndAnUnansweredProbeFails) {
  Membership m({});
  m.OnHeartbeat(Beat("reward", "waiting-for-data", 0), 0);
  EXPECT_TRUE(m.Tick(3000).empty());
  auto d = m.Tick(3001);
  ASSERT_EQ(Events(d), (Strings{"suspect", "probe"}));
  EXPECT_EQ(d[1].routing, "conn-reward");
  EXPECT_TRUE(m.Tick(4000).empty()) << "the probe has one interval to be answered";
  d = m.Tick(4002);
  ASSERT_EQ(Events(d), Strings{"failed"});
  EXPECT_NE(d[0].reason.find("no heartbeat for 3.0 s and no answer to a probe"), std::string::npos) << d[0].reason;
  EXPECT_EQ(d[0].silent_ms, 4002);
}

TEST(MembershipTest, AHeartbeatAfterSuspicionClearsIt) {
  Membership m({});
  m.OnHeartbeat(Beat("queue", "serve", 0), 0);
  m.Tick(3500);
  EXPECT_EQ(Events(m.OnHeartbeat(Beat("queue", "serve", 0), 3600)), Strings{"cleared"});
  EXPECT_EQ(m.Find("queue/0")->state, MemberState::kAlive);
}

TEST(MembershipTest, AGoneProcessFailsAtOnce) {
  DetectorOptions o;
  bool gone = false;
  o.process_gone = [&](const Heartbeat&) { return gone; };
  Membership m(o);
  m.OnHeartbeat(Beat("train", "train", 1), 0);
  EXPECT_TRUE(m.Tick(100).empty());
  gone = true;
  auto d = m.Tick(200);
  ASSERT_EQ(Events(d), Strings{"failed"});
  EXPECT_EQ(d[0].reason, "process 100 is gone");
}

TEST(MembershipTest, TrainerWithoutProgressInPhaseTrainFailsAfterItsThreshold) {
  DetectorOptions o;
  o.stall_ms["train"] = 10000;
  Membership m(o);
  m.OnHeartbeat(Beat("train", "train", 5), 0);
  for (int64_t t = 1000; t <= 10000; t += 1000) {
    EXPECT_TRUE(m.OnHeartbeat(Beat("train", "train", 5), t).empty());
    EXPECT_TRUE(m.Tick(t).empty()) << t;
  }
  m.OnHeartbeat(Beat("train", "train", 5), 10500);
  auto d = m.Tick(10500);
  ASSERT_EQ(Events(d), Strings{"failed"});
  EXPECT_EQ(d[0].reason, "no progress in phase train for 10.5 s");
}

TEST(MembershipTest, IdlePhasesNeverCountHoweverLong) {
  DetectorOptions o;
  o.stall_ms["train"] = 10000;
  Membership m(o);
  m.OnHeartbeat(Beat("train", "waiting-for-data", 5), 0);
  m.OnHeartbeat(Beat("rollout", "waiting-for-weights", 0), 0);
  m.OnHeartbeat(Beat("reward", "score", 0), 0);  // a reward command sleeping 90 s
  for (int64_t t = 1000; t <= 120000; t += 1000) {
    m.OnHeartbeat(Beat("train", "waiting-for-data", 5), t);
    m.OnHeartbeat(Beat("rollout", "waiting-for-weights", 0), t);
    m.OnHeartbeat(Beat("reward", "score", 0), t);
    ASSERT_TRUE(m.Tick(t).empty()) << t;
  }
}

TEST(MembershipTest, PhaseChangeRestartsTheStallClock) {
  DetectorOptions o;
  o.stall_ms["train"] = 10000;
  Membership m(o);
  EXPECT_TRUE(Beats(&m, Beat("train", "waiting-for-data", 5), 0, 8000).empty());
  EXPECT_TRUE(Beats(&m, Beat("train", "train", 5), 9000, 19000).empty());
  EXPECT_EQ(Events(m.Tick(19001)), Strings{"failed"});
}

TEST(MembershipTest, StalledRolloutIsProbedAndClearedWhenItsCpuIsBusy) {
  DetectorOptions o;
  o.stall_ms["rollout"] = 5000;
  o.probe_window_ms = 1000;
  Membership m(o);
  EXPECT_TRUE(Beats(&m, Beat("rollout", "generate", 7), 0, 5000).empty());
  auto d = m.Tick(5001);
  ASSERT_EQ(Events(d), (Strings{"suspect", "probe"}));
  EXPECT_EQ(d[1].probe_window_ms, 1000);
  Received answer = Beat("rollout", "generate", 7);
  answer.hb.probe_rid = d[1].probe_rid;
  answer.hb.cpu_busy = 0.9;  // generating a long tail, just no batch finished yet
  d = m.OnHeartbeat(answer, 6100);
  ASSERT_EQ(Events(d), Strings{"cleared"});
  EXPECT_TRUE(Beats(&m, Beat("rollout", "generate", 7), 7000, 11000).empty()) << "a cleared role gets a whole threshold again";
}

TEST(MembershipTest, StalledRolloutWhoseProbeFindsItIdleFails) {
  DetectorOptions o;
  o.stall_ms["rollout"] = 5000;
  Membership m(o);
  Beats(&m, Beat("rollout", "generate", 7), 0, 5000);
  auto d = m.Tick(5001);
  ASSERT_EQ(Events(d), (Strings{"suspect", "probe"}));
  Received answer = Beat("rollout", "generate", 7);
  answer.hb.probe_rid = d[1].probe_rid;
  answer.hb.cpu_busy = 0.01;
  d = m.OnHeartbeat(answer, 7100);
  ASSERT_EQ(Events(d), Strings{"failed"});
  EXPECT_NE(d[0].reason.find("a probe found no progress"), std::string::npos) << d[0].reason;
}

TEST(MembershipTest, ANewPidIsANewIncarnationThatRemembersTheOldOne) {
  Membership m({});
  m.OnHeartbeat(Beat("train", "train", 1, 100), 0);
  auto d = m.OnHeartbeat(Beat("train", "waiting-for-data", 0, 200), 10);
  ASSERT_EQ(Events(d), Strings{"joined"});
  EXPECT_EQ(d[0].previous_pid, 100u);
  EXPECT_EQ(m.Find("train/0")->last.pid, 200u);
}

TEST(MembershipTest, AFrozenRoleThatThawsRecoversButAStalledOneOnlyWhenItMoves) {
  DetectorOptions o;
  o.stall_ms["train"] = 5000;
  Membership m(o);
  m.OnHeartbeat(Beat("reward", "score", 0), 0);
  m.Tick(3001);
  EXPECT_EQ(Events(m.Tick(4002)), Strings{"failed"});
  EXPECT_EQ(Events(m.OnHeartbeat(Beat("reward", "score", 0), 9000)), Strings{"recovered"});
  Beats(&m, Beat("train", "train", 1), 0, 6000);
  EXPECT_EQ(m.Find("train/0")->state, MemberState::kFailed);
  EXPECT_TRUE(m.OnHeartbeat(Beat("train", "train", 1), 6500).empty());
  EXPECT_EQ(Events(m.OnHeartbeat(Beat("train", "train", 2), 7000)), Strings{"recovered"});
}

// The watchdog is frozen from 1 s to 10 s; the role beats until 5 s, then freezes too. The beats
// of 1..5 s queued up meanwhile are read at 10 s: as signs of life at the time they were sent,
// they leave the role silent since 5 s, so it is suspect at once and they do not clear it.
TEST(MembershipTest, HeartbeatsThatQueuedUpDuringAWatchdogFreezeCountWhenTheyWereSent) {
  int64_t now = 0;
  DetectorOptions o;
  o.age_ms = [&now](const Heartbeat& hb) { return now - hb.sent_ms; };  // sent_ms on the test's clock
  Membership m(o);
  auto beat = [&](int64_t sent) {
    Received r = Beat("reward", "waiting-for-data", 0);
    r.hb.sent_ms = sent;
    return m.OnHeartbeat(r, now);
  };
  beat(0);
  now = 10000;
  for (int64_t sent = 1000; sent <= 5000; sent += 1000) EXPECT_TRUE(beat(sent).empty());
  EXPECT_EQ(Events(m.Tick(now)), (Strings{"suspect", "probe"})) << "silent since 5 s, not since 10 s";
  now = 10050;
  EXPECT_TRUE(beat(5000).empty()) << "a beat from before the silence clears nothing";
  EXPECT_EQ(Events(beat(10040)), Strings{"cleared"}) << "a fresh one does";
}

// A full restart stops rollout/0 (pid 100, and the shell child 101 its heartbeats came from) and
// starts pid 200. Heartbeats the old processes sent before they were stopped are read only after:
// no ghost joins from them, neither before nor after the new process joins.
TEST(MembershipTest, HeartbeatsOfAProcessStoppedOnPurposeReadAfterItWasForgottenMakeNoJoin) {
  Membership m({});
  EXPECT_EQ(Events(m.OnHeartbeat(Beat("rollout", "generate", 1, 101), 0)), Strings{"joined"});
  m.Forget("rollout/0", 100);
  EXPECT_EQ(m.Find("rollout/0"), nullptr);
  EXPECT_TRUE(m.OnHeartbeat(Beat("rollout", "generate", 2, 101), 100).empty()) << "the member's last process";
  EXPECT_TRUE(m.OnHeartbeat(Beat("rollout", "generate", 2, 100), 100).empty()) << "the process stopped";
  EXPECT_EQ(m.Find("rollout/0"), nullptr);
  auto joined = m.OnHeartbeat(Beat("rollout", "generate", 1, 200), 200);
  ASSERT_EQ(Events(joined), Strings{"joined"});
  EXPECT_EQ(joined[0].previous_pid, 0u) << "the new process does not follow a ghost";
  EXPECT_TRUE(m.OnHeartbeat(Beat("rollout", "generate", 3, 101), 300).empty()) << "not after the new join either";
  EXPECT_EQ(m.Find("rollout/0")->last.pid, 200u);
  EXPECT_EQ(Events(m.OnHeartbeat(Beat("reward", "score", 1, 100), 300)), Strings{"joined"})
      << "the same pid under another key is another process's business";
}

}  // namespace
}  // namespace rl::health
