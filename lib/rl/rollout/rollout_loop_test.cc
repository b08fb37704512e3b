#include "rl/rollout/rollout_loop.h"

#include <gtest/gtest.h>

#include <thread>

#include "rl/model/test_util.h"
#include "rl/model/tokenizer.h"
#include "rl/rollout/rollout_loop_fixture.h"
#include "rl/rollout/rollout_loop_impl.h"

namespace rl::rollout {
namespace {

// The routes column (rl-protocol(7), ROUTES) in the narrowest dtype that holds every expert: u8 up
// to 256 experts, i16 up to 32768, i32 beyond; [N, S, k], read back as written.
TEST(RoutesColumnTest, TheNarrowestDtypeHoldsEveryExpert) {
  model::ModelConfig c = model::testing::TinyConfig(model::Architecture::kQwen3Moe);  // 2 sparse layers, k = 2
  const std::vector<int32_t> routes = {0, 3, 1, 2, 3, 0, 2, 1};  // N = 2 tokens
  struct Case {
    int64_t experts;
    DType dtype;
    int32_t largest;
  };
  for (const Case& k : {Case{4, DType::kU8, 3}, Case{256, DType::kU8, 255}, Case{257, DType::kI16, 256},
                        Case{32768, DType::kI16, 32767}, Case{40000, DType::kI32, 39999}}) {
    c.moe.num_experts = k.experts;
    std::vector<int32_t> r = routes;
    r[1] = k.largest;
    const Tensor t = detail::RoutesColumn(r, c);
    EXPECT_EQ(t.dtype, k.dtype) << k.experts;
    EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 2, 2}));
    EXPECT_TRUE(t.Validate().ok());
    const std::vector<int64_t> back = t.ToI64();
    EXPECT_EQ(back, std::vector<int64_t>(r.begin(), r.end())) << k.experts;
  }
}

TEST_F(RolloutLoopTest, WritesResponsesLogprobsAndVersionAndAcksGenerate) {
  PutPrompts(3, 4);
  RolloutStats stats = RunUntilConsumed(12, Options());
  EXPECT_EQ(stats.rows, 12u);
  EXPECT_EQ(stats.groups, 3u);
  EXPECT_EQ(queue_->Task("generate")["consumed"], 12);
  EXPECT_EQ(queue_->Task("generate")["leased"], 0);
  auto rows = RewardRows(12);
  ASSERT_EQ(rows.size(), 12u);
  model::CharTokenizer tok;
  for (const auto& row : rows) {
    // The reward task's columns; response_ids, logprobs and version come with a get of train.
    const Value* response = FindColumn(row.columns, "response");
    ASSERT_NE(response, nullptr);
    EXPECT_TRUE(std::holds_alternative<std::string>(*response));
  }
  queue::GetRequest g;
  g.task = "check";
  g.columns = {"response_ids", "logprobs", "version", "response"};
  g.count = 12;
  auto got = queue_->Client().Get(g);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->rows.size(), 12u);
  for (const auto& row : got->rows) {
    const Tensor& ids = std::get<Tensor>(*FindColumn(row.columns, "response_ids"));
    const Tensor& lps = std::get<Tensor>(*FindColumn(row.columns, "logprobs"));
    EXPECT_EQ(ids.dtype, DType::kI64);
    EXPECT_EQ(lps.dtype, DType::kF32);
    EXPECT_EQ(ids.NumElements(), lps.NumElements());
    EXPECT_GE(ids.NumElements(), 1);
    EXPECT_LE(ids.NumElements(), 6);
    for (double lp : lps.ToF64()) EXPECT_LE(lp, 0.0);
    EXPECT_EQ(std::get<int64_t>(*FindColumn(row.columns, "version")), 1);
    EXPECT_EQ(std::get<std::string>(*FindColumn(row.columns, "response")), *tok.Decode(ids.ToI64()));
  }
}

TEST_F(RolloutLoopTest, AKilledRolloutLosesNothing) {
  PutPrompts(4, 2);
  // A rollout that leases two groups and dies: it never acks.
  queue::GetRequest g;
  g.task = "generate";
  g.count = 4;
  g.groups = true;
  g.lease_ms = 500;
  auto dead = queue_->Client().Get(g);
  ASSERT_TRUE(dead.ok());
  ASSERT_EQ(dead->rows.size(), 4u);
  RolloutStats stats = RunUntilConsumed(8, Options());
  EXPECT_EQ(stats.rows, 8u);
  EXPECT_EQ(stats.groups, 4u);
  EXPECT_EQ(queue_->Task("generate")["consumed"], 8);
  EXPECT_EQ(RewardRows(8).size(), 8u);
  // The dead rollout's late put is refused: its lease is gone, and every row is written once.
  queue::PutRequest late;
  late.ack_task = "generate";
  late.ack_lease = dead->lease;
  late.rows.push_back({dead->rows[0].index, {{"response", std::string("late")}}});
  EXPECT_FALSE(queue_->Client().Put(late).ok());
}

TEST_F(RolloutLoopTest, PicksUpANewerWeightVersionAtABatchBoundary) {
  PutPrompts(1, 4);
  RunUntilConsumed(4, Options());
  testing::WriteWeights(dir_, 2, 6);
  PutPrompts(1, 4, 1);
  RunUntilConsumed(8, Options());
  queue::GetRequest g;
  g.task = "check";
  g.columns = {"version"};
  g.count = 8;
  auto got = queue_->Client().Get(g);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->rows.size(), 8u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(std::get<int64_t>(*FindColumn(got->rows[i].columns, "version")), i < 4 ? 1 : 2);
}

TEST_F(RolloutLoopTest, ARowTheModelCannotTakeGetsAnErrorAndDoesNotStallTheLoop) {
  queue::PutRequest put;
  put.rows.push_back({std::nullopt, {{"prompt_ids", Tensor::FromI64({1, 99})}, {"group", int64_t{0}}}});
  put.rows.push_back({std::nullopt, {{"prompt_ids", Tensor::FromI64({1, 4, 5})}, {"group", int64_t{1}}}});
  ASSERT_TRUE(queue_->Client().Put(put).ok());
  RolloutStats stats = RunUntilConsumed(2, Options());
  EXPECT_EQ(stats.bad_rows, 1u);
  queue::GetRequest g;
  g.task = "check";
  g.columns = {"error"};
  auto got = queue_->Client().Get(g);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->rows.size(), 1u);
  EXPECT_NE(std::get<std::string>(*FindColumn(got->rows[0].columns, "error")).find("outside the vocabulary"), std::string::npos);
}

}  // namespace
}  // namespace rl::rollout

namespace rl::rollout {
namespace {

TEST_F(RolloutLoopTest, StoppedWhileWaitingItGivesBackRowsItHasNotStartedOn) {
  RolloutOptions o = Options();
  o.wait_ms = 3000;
  std::atomic<bool> stop{false};
  Policy policy;
  Status result;
  std::thread t([&] { result = RunRollout(o, &policy, stop, nullptr); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // inside its blocking get
  stop = true;
  PutPrompts(1, 4);  // the get returns these after the stop request
  t.join();
  EXPECT_TRUE(result.ok()) << result.ToString();
  EXPECT_EQ(queue_->Task("generate")["consumed"], 0);
  EXPECT_EQ(queue_->Task("generate")["leased"], 0);
  EXPECT_EQ(queue_->Task("generate")["ready"], 4);
}

}  // namespace
}  // namespace rl::rollout
