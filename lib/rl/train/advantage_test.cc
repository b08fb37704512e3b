// Advantage estimators against values worked out by hand from their definitions (advantage.h).
#include "rl/train/advantage.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "rl/model/test_util.h"
#include "rl/train/value_model.h"

namespace rl::train {
namespace {

TEST(AdvantageTest, NamesRoundTripAndUnknownOnesAreRefused) {
  for (const char* name : {"grpo", "rloo", "reinforce++", "reinforce++-baseline", "gae"}) {
    auto a = ParseAdvantage(name);
    ASSERT_TRUE(a.ok()) << name;
    EXPECT_STREQ(AdvantageName(*a), name);
  }
  EXPECT_FALSE(ParseAdvantage("ppo").ok());
  EXPECT_TRUE(GroupRelative(Advantage::kReinforcePPBaseline));
  EXPECT_FALSE(GroupRelative(Advantage::kGae));
  EXPECT_FALSE(PerGroup(Advantage::kReinforcePP));
}

TEST(AdvantageTest, LeaveOneOutSubtractsTheMeanOfTheOthers) {
  std::vector<double> a = LeaveOneOutAdvantages({1, 0, 0, 1});
  // 1 - (0 + 0 + 1) / 3 = 2/3; 0 - (1 + 0 + 1) / 3 = -2/3.
  EXPECT_NEAR(a[0], 2.0 / 3, 1e-12);
  EXPECT_NEAR(a[1], -2.0 / 3, 1e-12);
  EXPECT_EQ(LeaveOneOutAdvantages({5}), std::vector<double>{0.0}) << "no others, no baseline";
  std::vector<double> c = GroupCentred({3, 1});
  EXPECT_DOUBLE_EQ(c[0], 1);
  EXPECT_DOUBLE_EQ(c[1], -1);
}

TEST(AdvantageTest, WhiteningWeighsAResponseByItsTokens) {
  // Values 1 (3 tokens) and 0 (1 token): mean 0.75, var with n - 1 = (3 * 0.0625 + 0.5625) / 3 = 0.25.
  std::vector<double> w = WhitenPerResponse({1, 0, 7}, {3, 1, 0});
  EXPECT_NEAR(w[0], 0.25 / std::sqrt(0.25 + 1e-8), 1e-9);
  EXPECT_NEAR(w[1], -0.75 / std::sqrt(0.25 + 1e-8), 1e-9);
  EXPECT_EQ(w[2], 0.0) << "a response without tokens";
  std::vector<std::vector<float>> tokens = {{1, 1, 1}, {0}};
  WhitenTokens(&tokens);
  EXPECT_NEAR(tokens[0][2], w[0], 1e-6);
  EXPECT_NEAR(tokens[1][0], w[1], 1e-6);
}

TEST(AdvantageTest, GaeByHand) {
  // Three tokens, reward 1 at the end, values 0.5, 0.2, 0.8, gamma 0.9, lambda 0.5:
  //   delta2 = 1 - 0.8 = 0.2;             A2 = 0.2
  //   delta1 = 0.9 * 0.8 - 0.2 = 0.52;    A1 = 0.52 + 0.45 * 0.2 = 0.61
  //   delta0 = 0.9 * 0.2 - 0.5 = -0.32;   A0 = -0.32 + 0.45 * 0.61 = -0.0455
  std::vector<float> returns;
  std::vector<float> a = Gae(1.0, {0.5f, 0.2f, 0.8f}, 0.9, 0.5, &returns);
  ASSERT_EQ(a.size(), 3u);
  EXPECT_NEAR(a[2], 0.2, 1e-6);
  EXPECT_NEAR(a[1], 0.61, 1e-6);
  EXPECT_NEAR(a[0], -0.0455, 1e-6);
  EXPECT_NEAR(returns[0], 0.4545, 1e-6);
  EXPECT_NEAR(returns[2], 1.0, 1e-6);
  // gamma = lambda = 1 with zero values: every token's advantage is the outcome reward.
  a = Gae(0.7, {0, 0, 0, 0}, 1, 1, &returns);
  for (float x : a) EXPECT_NEAR(x, 0.7, 1e-6);
  EXPECT_TRUE(Gae(1, {}, 1, 1, &returns).empty());
}

// A multi-turn response: model tokens m, tool tokens t (mask 0). Over the mask, GAE and whitening
// see the model tokens alone, as if the tool tokens were cut out, and a reward on a tool token
// (an outcome at the end of a conversation that ended on a call) counts at the model token before.
TEST(AdvantageTest, ToolTokensAreNeitherStepsNorWhitened) {
  //                                 m0    m1    t     t     m2    t
  const std::vector<int64_t> mask = {1, 1, 0, 0, 1, 0};
  const std::vector<float> values = {0.5f, 0.2f, 9.0f, -7.0f, 0.8f, 3.0f};
  const std::vector<float> rewards = {0, 0.25f, 0, 0, 0, 1.0f};
  std::vector<float> returns, cut_returns;
  const std::vector<float> a = Gae(rewards, values, 0.9, 0.5, &returns, mask);
  const std::vector<float> cut = Gae({0, 0.25f, 1.0f}, {0.5f, 0.2f, 0.8f}, 0.9, 0.5, &cut_returns);
  ASSERT_EQ(a.size(), 6u);
  const size_t trained[] = {0, 1, 4};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(a[trained[i]], cut[i], 1e-6) << "token " << trained[i];
    EXPECT_NEAR(returns[trained[i]], cut_returns[i], 1e-6) << "token " << trained[i];
  }
  // Without the mask the tool tokens' values and steps change the model tokens' advantages.
  EXPECT_GT(std::fabs(Gae(rewards, values, 0.9, 0.5, &returns)[0] - cut[0]), 0.01);

  std::vector<std::vector<float>> x = {{1, 100, 3}, {5, -50}}, alone = {{1, 3}, {5}};
  const std::vector<int64_t> m1 = {1, 0, 1}, m2 = {1, 0};
  ASSERT_TRUE(WhitenTokens(&x, nullptr, {&m1, &m2}).ok());
  ASSERT_TRUE(WhitenTokens(&alone, nullptr).ok());
  EXPECT_NEAR(x[0][0], alone[0][0], 1e-6);
  EXPECT_NEAR(x[0][2], alone[0][1], 1e-6);
  EXPECT_NEAR(x[1][0], alone[1][0], 1e-6);
}

TEST(ValueModelTest, StartsAtZeroAndLoadsWhatItSaves) {
  model::Transformer policy = model::Transformer::Create(model::testing::TinyConfig(), 3).value();
  auto critic = ValueModel::FromPolicy(policy);
  ASSERT_TRUE(critic.ok()) << critic.status().ToString();
  at::Tensor tokens = at::tensor({1, 4, 5, 6, 2, 7}, at::kLong).reshape({2, 3});
  at::Tensor v = critic->Values(tokens).value();
  EXPECT_EQ(v.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(v.abs().max().item<float>(), 0.0f);
  // A head and backbone of other weights, loaded by name, give those weights' values.
  auto other = ValueModel::FromPolicy(model::Transformer::Create(model::testing::TinyConfig(), 9).value()).value();
  model::NamedTensors named = other.NamedParameters();
  named.back().second = at::ones_like(named.back().second);
  ASSERT_TRUE(other.LoadNamedParameters(named).ok());
  ASSERT_TRUE(critic->LoadNamedParameters(other.NamedParameters()).ok());
  EXPECT_TRUE(at::allclose(critic->Values(tokens).value(), other.Values(tokens).value()));
  EXPECT_GT(critic->Values(tokens).value().abs().max().item<float>(), 0.0f);
  // A missing head is refused and changes nothing.
  named.pop_back();
  EXPECT_FALSE(critic->LoadNamedParameters(named).ok());
  // Clone is independent.
  ValueModel copy = critic->Clone().value();
  ASSERT_TRUE(copy.LoadNamedParameters(ValueModel::FromPolicy(policy).value().NamedParameters()).ok());
  EXPECT_GT(critic->Values(tokens).value().abs().max().item<float>(), 0.0f);
  EXPECT_EQ(copy.Values(tokens).value().abs().max().item<float>(), 0.0f);
}

// A mixture-of-experts critic replays routes as the policy does (GrpoTrainer gives it the rows'):
// replaying the experts its own routers pick changes nothing, other experts change the values.
TEST(ValueModelTest, AMixtureOfExpertsCriticReplaysRoutes) {
  const model::ModelConfig c = model::testing::TinyConfig(model::Architecture::kQwen3Moe);
  model::Transformer policy = model::Transformer::Create(c, 3).value();
  model::testing::RandomizeWeights(&policy, 4);
  ValueModel critic = ValueModel::FromPolicy(policy).value();
  model::NamedTensors named = critic.NamedParameters();
  named.back().second = at::ones_like(named.back().second);
  ASSERT_TRUE(critic.LoadNamedParameters(named).ok());
  const at::Tensor tokens = at::tensor({1, 4, 5, 6, 2, 7}, at::kLong).reshape({2, 3});
  at::Tensor own;
  ASSERT_TRUE(policy.Forward(tokens, {at::Tensor(), &own}).ok());
  ASSERT_EQ(own.dim(), 4);
  const at::Tensor free = critic.Values(tokens).value();
  EXPECT_TRUE(at::allclose(critic.Values(tokens, own).value(), free, 1e-5, 1e-5));
  const at::Tensor other = (own + 1).remainder(c.moe.num_experts);  // each token's next experts
  EXPECT_GT((critic.Values(tokens, other).value() - free).abs().max().item<double>(), 1e-4);
  EXPECT_FALSE(critic.Values(tokens, other.narrow(1, 0, 2)).ok()) << "routes of another shape";
}

// DeepSeekMath's process supervision by hand: turn rewards 1, 0 (response 0, ends 1 and 3) and 0
// (response 1, end 2): mean 1/3, std sqrt(1/3); 1 -> 2/3 / (0.57735 + 1e-4), 0 -> -1/3 / (...).
TEST(AdvantageTest, ProcessAdvantagesSumTheNormalisedRewardsOfTheTurnsEndingAtOrAfterAToken) {
  const double sd = std::sqrt(1.0 / 3) + 1e-4, hi = (2.0 / 3) / sd, lo = (-1.0 / 3) / sd;
  auto p = ProcessAdvantages({3, 2}, {{1, 3}, {2}}, {{1.0f, 0.0f}, {0.0f}});
  ASSERT_EQ(p.size(), 2u);
  ASSERT_EQ(p[0].size(), 3u);
  EXPECT_NEAR(p[0][0], hi + lo, 1e-6);
  EXPECT_NEAR(p[0][1], lo, 1e-6);
  EXPECT_NEAR(p[0][2], lo, 1e-6);
  EXPECT_NEAR(p[1][0], lo, 1e-6);
  EXPECT_NEAR(p[1][1], lo, 1e-6);
  // Unknown ends (-1) count for nothing; fewer than two known rewards: all 0.
  auto one = ProcessAdvantages({2, 2}, {{-1, 2}, {}}, {{5.0f, 1.0f}, {}});
  EXPECT_EQ(one[0], (std::vector<float>{0, 0}));
  EXPECT_EQ(one[1], (std::vector<float>{0, 0}));
}

TEST(AdvantageTest, TokenRewardsPutTurnRewardsAtTheirLastTokensAndTheOutcomeLast) {
  EXPECT_EQ(TokenRewards(1.0, 4, {2, 4}, {0.5f, 0.25f}), (std::vector<float>{0, 0.5f, 0, 1.25f}));
  EXPECT_EQ(TokenRewards(1.0, 3, {-1}, {9.0f}), (std::vector<float>{0, 0, 1.0f}));
  EXPECT_TRUE(TokenRewards(1.0, 0, {}, {}).empty());
  // Gae over token rewards equals the outcome-only Gae when there are none.
  std::vector<float> values = {0.1f, -0.2f, 0.3f}, r1, r2;
  EXPECT_EQ(Gae(1.0, values, 0.9, 0.8, &r1), Gae(TokenRewards(1.0, 3, {}, {}), values, 0.9, 0.8, &r2));
  EXPECT_EQ(r1, r2);
}

}  // namespace
}  // namespace rl::train
