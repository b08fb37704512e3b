#include "rl/reward/reward_loop.h"

#include <gtest/gtest.h>

#include "rl/reward/exec_verifier.h"
#include "rl/queue/test_queue.h"

namespace rl::reward {
namespace {

using rl::testing::TestQueue;

// Rows as rl-rollout leaves them: prompt, answer, response, acked for generate.
void PutScoredRows(TestQueue& q, const std::vector<std::pair<std::string, std::string>>& response_answer) {
  queue::PutRequest put;
  for (const auto& [response, answer] : response_answer) {
    put.rows.push_back({std::nullopt, {{"prompt", std::string("037+480=")}, {"answer", answer},
                                       {"response", response}}});
  }
  auto done = q.Client().Put(put);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
}

RewardLoopOptions Options(const TestQueue& q, uint64_t max_rows) {
  RewardLoopOptions o;
  o.client = q.Options();
  o.count = 4;
  o.wait_ms = 200;
  o.progress_ms = 0;
  o.max_rows = max_rows;
  return o;
}

TEST(RewardLoopTest, WritesRewardsAndAcksTheRowsForRewardAtomically) {
  TestQueue q({{"reward", {"prompt", "response", "answer"}}, {"train", {"reward"}}});
  PutScoredRows(q, {{"517", "517"}, {"51", "517"}, {"1998", "1998"}, {"", "5"}, {"5", "5"}});
  auto v = MakeAdditionVerifier();
  std::atomic<bool> stop{false};
  RewardStats stats;
  ASSERT_TRUE(RunRewardLoop(Options(q, 5), v.get(), stop, &stats).ok());
  EXPECT_EQ(stats.rows, 5u);
  EXPECT_EQ(stats.reward_sum, 3.0);
  EXPECT_EQ(q.Task("reward")["consumed"], 5);
  EXPECT_EQ(q.Task("reward")["ready"], 0);
  queue::GetRequest g;
  g.task = "train";
  g.count = 5;
  auto got = q.Client().Get(g);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->rows.size(), 5u);
  std::vector<double> rewards;
  for (const auto& row : got->rows) {
    const Value* r = FindColumn(row.columns, "reward");
    ASSERT_NE(r, nullptr);
    // msgpack carries 1.0 as the integer 1 (man/rl-protocol.7).
    rewards.push_back(std::holds_alternative<double>(*r) ? std::get<double>(*r) : std::get<int64_t>(*r));
  }
  EXPECT_EQ(rewards, (std::vector<double>{1, 0, 1, 0, 1}));
}

TEST(RewardLoopTest, RowsTheVerifierCannotScoreAreNackedNotZeroed) {
  TestQueue q({{"reward", {"prompt", "response", "answer"}}});
  PutScoredRows(q, {{"517", "517"}, {"12", "12"}});
  ExecVerifier v("while read -r l; do echo 'not json'; done", 2000);
  std::atomic<bool> stop{false};
  RewardLoopOptions o = Options(q, 0);
  RewardStats stats;
  // Every row fails; after kMaxConsecutiveFailures the verifier is broken and the loop stops.
  Status s = RunRewardLoop(o, &v, stop, &stats);
  EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
  EXPECT_EQ(stats.rows, 0u);
  EXPECT_GE(stats.failed, 2u);
  EXPECT_EQ(q.Task("reward")["consumed"], 0);
  EXPECT_EQ(q.Task("reward")["ready"], 2);  // given back at once, not held until the lease ends
}

TEST(RewardLoopTest, AStopRequestEndsAnIdleLoop) {
  TestQueue q({{"reward", {"prompt", "response", "answer"}}});
  auto v = MakeAdditionVerifier();
  std::atomic<bool> stop{true};
  EXPECT_TRUE(RunRewardLoop(Options(q, 0), v.get(), stop).ok());
}

}  // namespace
}  // namespace rl::reward
