#include "rl/health/sd_watchdog.h"

#include <gtest/gtest.h>

namespace rl::health {
namespace {

Heartbeat Beat(const std::string& role, const std::string& phase, uint64_t progress) {
  Heartbeat hb;
  hb.role = role;
  hb.id = "0";
  hb.phase = phase;
  hb.counters = {{"rows", progress}};
  return hb;
}

DetectorOptions Rules() {
  DetectorOptions o;  // the detector's defaults but for the thresholds
  o.stall_ms = {{"train", 3000}, {"rollout", 5000}};
  return o;
}

TEST(SdWatchdogGateTest, AnIdlePhasePingsWithoutProgress) {
  SdWatchdogGate gate(Rules());
  for (int64_t t = 0; t <= 600000; t += 1000) {
    ASSERT_TRUE(gate.Ping(Beat("train", "waiting-for-data", 7), t, 0)) << t;
  }
  EXPECT_TRUE(gate.Ping(Beat("reward", "score", 7), 700000, 0)) << "no active phase for reward";
}

TEST(SdWatchdogGateTest, AStuckTrainerStopsPingingAfterItsThresholdAndStartsAgainWhenItMoves) {
  SdWatchdogGate gate(Rules());
  for (int64_t t = 0; t <= 10000; t += 1000) {  // moving: every beat pings
    ASSERT_TRUE(gate.Ping(Beat("train", "train", t / 1000), t, t)) << t;
  }
  uint64_t progress = 10;
  // Stuck from 10 s on (progress stays; CPU busy does not help a trainer: the detector fails it
  // without a probe).
  for (int64_t t = 11000; t <= 13000; t += 1000) EXPECT_TRUE(gate.Ping(Beat("train", "train", progress), t, t)) << t;
  EXPECT_FALSE(gate.Ping(Beat("train", "train", progress), 14000, 14000));
  EXPECT_NE(gate.why().find("no progress in phase train for 4.0 s"), std::string::npos) << gate.why();
  EXPECT_FALSE(gate.Ping(Beat("train", "train", progress), 60000, 60000));
  EXPECT_TRUE(gate.Ping(Beat("train", "train", progress + 1), 61000, 61000)) << "it moved";
  EXPECT_TRUE(gate.why().empty());
}

TEST(SdWatchdogGateTest, APhaseChangeCountsAsMovement) {
  SdWatchdogGate gate(Rules());
  EXPECT_TRUE(gate.Ping(Beat("train", "train", 1), 0, 0));
  EXPECT_FALSE(gate.Ping(Beat("train", "train", 1), 4000, 0));
  EXPECT_TRUE(gate.Ping(Beat("train", "checkpoint", 1), 5000, 0));
  EXPECT_TRUE(gate.Ping(Beat("train", "train", 1), 6000, 0)) << "back in train: a new threshold";
  EXPECT_TRUE(gate.Ping(Beat("train", "train", 1), 9000, 0));
  EXPECT_FALSE(gate.Ping(Beat("train", "train", 1), 9100, 0));
}

TEST(SdWatchdogGateTest, ARolloutPastItsThresholdPingsWhileItsCpuIsBusyAsAProbeWouldFind) {
  SdWatchdogGate gate(Rules());
  int64_t cpu = 0;
  EXPECT_TRUE(gate.Ping(Beat("rollout", "generate", 0), 0, cpu));
  for (int64_t t = 1000; t <= 20000; t += 1000) {  // a long generation: one core busy
    cpu += 1000;
    ASSERT_TRUE(gate.Ping(Beat("rollout", "generate", 0), t, cpu)) << t;
  }
  cpu += 100;  // 0.1 cores in the last second: below busy_cores (0.2)
  EXPECT_FALSE(gate.Ping(Beat("rollout", "generate", 0), 21000, cpu));
  EXPECT_NE(gate.why().find("and the CPU idle"), std::string::npos) << gate.why();
  cpu += 500;
  EXPECT_TRUE(gate.Ping(Beat("rollout", "generate", 0), 22000, cpu));
}

}  // namespace
}  // namespace rl::health
