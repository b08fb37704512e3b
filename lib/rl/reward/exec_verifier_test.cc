#include "rl/reward/exec_verifier.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "rl/core/clock.h"

namespace rl::reward {
namespace {

const RewardRequest kReq{"037+480=", "517", "517"};

TEST(ExecVerifierTest, ReadsTheRewardFromEachReply) {
  // Echoes 1 when the request's response equals its answer (crudely, by grep), else 0.
  ExecVerifier v("while read -r l; do case \"$l\" in *'\"response\":\"517\"'*) echo '{\"reward\": 1}';; "
                 "*) echo '{\"reward\": 0.25, \"note\": \"x\"}';; esac; done",
                 5000);
  auto r = v.Score(kReq);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 1.0);
  auto r2 = v.Score({"p", "9", "517"});
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(*r2, 0.25);
  EXPECT_EQ(v.process().starts(), 1);
}

TEST(ExecVerifierTest, ACommandThatDiesIsRestarted) {
  // Answers one request, then exits.
  ExecVerifier v("read -r l; echo '{\"reward\": 1}'", 5000);
  for (int i = 0; i < 3; ++i) {
    auto r = v.Score(kReq);
    ASSERT_TRUE(r.ok()) << i << ": " << r.status().ToString();
    EXPECT_EQ(*r, 1.0);
  }
  EXPECT_EQ(v.process().starts(), 3);
}

TEST(ExecVerifierTest, ACommandThatDiesBeforeReplyingFailsTheRowAfterOneRetry) {
  ExecVerifier v("read -r l; exit 3", 5000);
  auto r = v.Score(kReq);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("exited with status 3"), std::string::npos) << r.status().message();
  EXPECT_EQ(v.process().starts(), 2);
  EXPECT_FALSE(v.broken());
}

TEST(ExecVerifierTest, ACommandThatClosesItsOutputButRunsOnIsKilledNotWaitedFor) {
  ExecVerifier v("exec >&-; sleep 30", 20000);
  int64_t start = MonoMillis();
  auto r = v.Score(kReq);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(r.status().message().find("killed by signal 9"), std::string::npos) << r.status().message();
  EXPECT_LT(MonoMillis() - start, 3000);
}

TEST(ExecVerifierTest, AStalledCommandTimesOutAndIsRestarted) {
  // Stalls on the first request only (a marker file), then answers.
  std::string marker = ::testing::TempDir() + "/stalled-" + std::to_string(::getpid());
  std::remove(marker.c_str());
  ExecVerifier v("while read -r l; do if [ ! -e " + marker + " ]; then touch " + marker +
                     "; sleep 30; fi; echo '{\"reward\": 1}'; done",
                 300);
  int64_t start = MonoMillis();
  auto r = v.Score(kReq);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kTimeout);
  EXPECT_LT(MonoMillis() - start, 3000);
  EXPECT_NE(r.status().message().find("no reply within 0.3 s"), std::string::npos) << r.status().message();
  EXPECT_FALSE(v.process().running());  // killed, sleep included (its process group)
  auto r2 = v.Score(kReq);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  EXPECT_EQ(*r2, 1.0);
  std::remove(marker.c_str());
}

TEST(ExecVerifierTest, AMalformedReplyIsAClearErrorNeverAZero) {
  for (const char* reply : {"nope", "{\"reward\": \"1\"}", "{\"score\": 1}", "[1]", "{\"reward\": 1"}) {
    ExecVerifier v(std::string("while read -r l; do echo '") + reply + "'; done", 5000);
    auto r = v.Score(kReq);
    ASSERT_FALSE(r.ok()) << reply;
    EXPECT_EQ(r.status().code(), Code::kDataError) << reply;
    EXPECT_NE(r.status().message().find("malformed reply"), std::string::npos) << r.status().message();
    EXPECT_NE(r.status().message().find(reply), std::string::npos) << r.status().message();
  }
}

TEST(ExecVerifierTest, ARewardBeyondWhatTheTrainerTakesIsRefused) {
  for (const char* reply : {"{\"reward\": 1e300}", "{\"reward\": -2e6}"}) {
    ExecVerifier v(std::string("while read -r l; do echo '") + reply + "'; done", 5000);
    auto r = v.Score(kReq);
    ASSERT_FALSE(r.ok()) << reply;
    EXPECT_EQ(r.status().code(), Code::kDataError) << reply;
    EXPECT_NE(r.status().message().find("above 1e6"), std::string::npos) << r.status().message();
  }
  ExecVerifier edge("while read -r l; do echo '{\"reward\": 1e6}'; done", 5000);
  auto r = edge.Score(kReq);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, 1e6);
}

TEST(ExecVerifierTest, StrayOutputBeforeTheNextRequestRestartsTheCommand) {
  // Answers every request with two lines: the second is stray. (Output that arrives only after
  // the next request was sent cannot be told from its reply: a line protocol has no ids.)
  ExecVerifier v("while read -r l; do echo '{\"reward\": 1}'; echo '{\"reward\": 0}'; done", 5000);
  for (int i = 0; i < 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    auto r = v.Score(kReq);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, 1.0) << i;  // never the stray 0 of the previous exchange
  }
}

TEST(ExecVerifierTest, GivesUpAfterManyFailuresInARow) {
  ExecVerifier v("exit 1", 5000);
  Status last;
  for (int i = 0; i < ExecVerifier::kMaxConsecutiveFailures; ++i) last = v.Score(kReq).status();
  EXPECT_TRUE(v.broken());
  EXPECT_EQ(last.code(), Code::kUnavailable);
  EXPECT_NE(last.message().find("giving up"), std::string::npos) << last.message();
}

}  // namespace
}  // namespace rl::reward
