#include "rl/health/policy.h"

#include <gtest/gtest.h>

namespace rl::health {
namespace {

Failure At(const std::string& key, int64_t step, int64_t since_start = 3, int failed_restarts = 0) {
  return {key, "killed by signal 9", step, since_start, failed_restarts};
}

TEST(RestartPolicyTest, AFailureAfterProgressRestartsTheFailedRoleOnly) {
  RestartPolicy p(false, 2);
  EXPECT_EQ(p.Decide(At("train/0", 5)).action, Action::kRestartRole);
  EXPECT_EQ(p.Decide(At("rollout/0", 6)).action, Action::kRestartRole);
  EXPECT_EQ(p.full_restarts(), 0);
}

TEST(RestartPolicyTest, AFailureInTheFirstStepAfterARestartEscalates) {
  RestartPolicy p(false, 2);
  Decision d = p.Decide(At("train/0", 5, 0));
  EXPECT_EQ(d.action, Action::kRestartJob);
  EXPECT_EQ(d.reason, "train/0 failed in the first step after its (re)start");
  EXPECT_EQ(p.full_restarts(), 1);
}

TEST(RestartPolicyTest, TheSameStepFailingTwiceEscalates) {
  RestartPolicy p(false, 2);
  EXPECT_EQ(p.Decide(At("train/0", 7)).action, Action::kRestartRole);
  Decision d = p.Decide(At("train/0", 7));
  EXPECT_EQ(d.action, Action::kRestartJob);
  EXPECT_EQ(d.reason, "train/0 failed twice at step 7");
}

TEST(RestartPolicyTest, ARestartFailingTwiceEscalates) {
  RestartPolicy p(false, 2);
  EXPECT_EQ(p.Decide(At("reward/0", 3, 1, 1)).action, Action::kRestartRole);
  EXPECT_EQ(p.Decide(At("reward/0", 4, 1, 2)).reason, "the restart of reward/0 failed twice");
}

TEST(RestartPolicyTest, GivesUpAfterTheConfiguredNumberOfFullRestarts) {
  RestartPolicy p(false, 1);
  EXPECT_EQ(p.Decide(At("train/0", 2, 0)).action, Action::kRestartJob);
  Decision d = p.Decide(At("train/0", 2, 0));
  EXPECT_EQ(d.action, Action::kGiveUp);
  EXPECT_NE(d.reason.find("1 full restart already did not help"), std::string::npos) << d.reason;
  EXPECT_EQ(p.history().size(), 2u);
}

TEST(RestartPolicyTest, JobModeRestartsEverythingEveryTime) {
  RestartPolicy p(true, 100);
  EXPECT_EQ(p.Decide(At("rollout/1", 9)).action, Action::kRestartJob);
  EXPECT_EQ(p.Decide(At("train/0", 12)).action, Action::kRestartJob);
}

// A watchdog restarted on the same run directory goes on from its predecessor's state: the
// failure at step 7 it inherited makes a second one at step 7 escalate, and the diagnosis lists
// both.
TEST(RestartPolicyTest, AStateRestoredAfterAWatchdogRestartKeepsFailedStepsAndHistory) {
  RestartPolicy first(false, 2);
  EXPECT_EQ(first.Decide(At("train/0", 7)).action, Action::kRestartRole);
  EXPECT_EQ(first.Decide(At("queue/0", 9, 0)).action, Action::kRestartJob);
  RestartPolicy next(false, 2);
  next.Restore(nlohmann::json::parse(first.State().dump()));
  EXPECT_EQ(next.full_restarts(), 1);
  EXPECT_EQ(next.Decide(At("train/0", 7)).reason, "train/0 failed twice at step 7");
  EXPECT_EQ(next.history().size(), 3u);
  RestartPolicy fresh(false, 2);
  fresh.Restore(nlohmann::json::parse(R"({"full_restarts": 1, "failed_steps": [["x", "y"], 3]})"));
  EXPECT_EQ(fresh.full_restarts(), 1);
  EXPECT_EQ(fresh.Decide(At("train/0", 7)).action, Action::kRestartRole);
}

}  // namespace
}  // namespace rl::health
