// GRPO arithmetic against hand-computed values, token batches, and checkpoints: a bit-exact round
// trip and a resumed step equal to an uninterrupted one. (How rows become samples: sample_test.cc.)
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <random>
#include <sstream>

#include "rl/model/hf_reference.h"
#include "rl/model/safetensors.h"
#include "rl/model/test_util.h"
#include "rl/train/advantage.h"
#include "rl/train/checkpoint.h"
#include "rl/train/grpo_loss.h"
#include "rl/train/grpo_trainer.h"
#include "rl/train/sample.h"
#include "rl/train/sft.h"
#include "rl/train/grpo_test_util.h"

namespace rl::train {
namespace {

using namespace grpo_fixture;

TEST(GroupAdvantagesTest, CentreAndScaleBySampleStdPlusEpsilon) {
  std::vector<double> a = GroupAdvantages({1, 0, 0, 1});
  // mean 0.5, sample std sqrt(1/3): 0.5 / (0.57735 + 1e-4)
  EXPECT_NEAR(a[0], 0.8658754297607016, 1e-12);
  EXPECT_NEAR(a[1], -0.8658754297607016, 1e-12);
  EXPECT_NEAR(a[3], a[0], 1e-15);
  for (double x : GroupAdvantages({1, 1, 1})) EXPECT_EQ(x, 0.0) << "a uniform group has no signal";
  EXPECT_EQ(GroupAdvantages({1}), std::vector<double>{0.0});
}

struct LossCase {
  at::Tensor new_lp, old_lp, mask, adv;
};

// Row 0: ratios 1.25 (clipped to 1.2, A = +1) and 1; row 1: ratio 1.6 with A = -1 (not clipped:
// the min takes the unclipped -1.6), then a padded position.
LossCase HandCase() {
  LossCase c;
  c.new_lp = at::log(at::tensor({0.5f, 0.25f, 0.8f, 0.9f})).reshape({2, 2}).requires_grad_(true);
  c.old_lp = at::log(at::tensor({0.4f, 0.25f, 0.5f, 1.0f})).reshape({2, 2});
  c.mask = at::tensor({1.f, 1.f, 1.f, 0.f}).reshape({2, 2});
  c.adv = at::tensor({1.f, -1.f});
  return c;
}

TEST(PolicyLossTest, TokenMeanMatchesHandComputedValuesAndGradients) {
  LossCase c = HandCase();
  auto sums = PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, LossNorm::kToken, at::Tensor(), 0);
  ASSERT_TRUE(sums.ok()) << sums.status().ToString();
  EXPECT_NEAR(sums->sum.item<double>(), -1.2 - 1.0 + 1.6, 1e-6);
  EXPECT_EQ(sums->tokens, 3);
  EXPECT_EQ(sums->sequences, 2);
  EXPECT_EQ(sums->clipped, 1);
  sums->sum.backward();
  at::Tensor g = c.new_lp.grad();
  // d l / d new_lp = -A * ratio where the unclipped term is taken, 0 where the clip holds.
  EXPECT_NEAR(g[0][0].item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(g[0][1].item<double>(), -1.0, 1e-6);
  EXPECT_NEAR(g[1][0].item<double>(), 1.6, 1e-6);
  EXPECT_NEAR(g[1][1].item<double>(), 0.0, 1e-6);
}

TEST(PolicyLossTest, SequenceMeanAveragesEachSequenceFirst) {
  LossCase c = HandCase();
  auto sums = PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, LossNorm::kSequence, at::Tensor(), 0);
  ASSERT_TRUE(sums.ok());
  EXPECT_NEAR(sums->sum.item<double>(), (-1.2 - 1.0) / 2 + 1.6, 1e-6);
}

// The per-token losses of HandCase are -1.2, -1 (sequence 0) and 1.6 (sequence 1).
TEST(PolicyLossTest, AggregationsAsPeersNameThem) {
  const std::vector<std::pair<std::string, double>> want = {
      {"token-mean", (-1.2 - 1.0 + 1.6) / 3},          {"token", (-1.2 - 1.0 + 1.6) / 3},
      {"seq-mean-token-mean", ((-1.2 - 1.0) / 2 + 1.6) / 2}, {"sequence", ((-1.2 - 1.0) / 2 + 1.6) / 2},
      {"seq-mean-token-sum", (-1.2 - 1.0 + 1.6) / 2},  {"seq-mean-token-sum-norm", (-1.2 - 1.0 + 1.6) / (2 * 4.0)}};
  for (const auto& [name, loss] : want) {
    auto norm = ParseLossNorm(name);
    ASSERT_TRUE(norm.ok()) << name;
    LossCase c = HandCase();
    auto sums = PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, *norm, at::Tensor(), 0);
    ASSERT_TRUE(sums.ok());
    EXPECT_NEAR(sums->sum.item<double>() / LossDenominator(*norm, sums->tokens, sums->sequences, 4.0), loss, 1e-6)
        << name;
  }
  EXPECT_FALSE(ParseLossNorm("seq-sum").ok());
}

// HandCase's ratios new/old are 1.25, 1 and 1.6; cap 1.5 cuts the last.
TEST(PolicyLossTest, TruncatedImportanceSamplingWeightsAPolicyGradient) {
  LossCase c = HandCase();
  auto sums = PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, LossNorm::kToken, at::Tensor(), 0,
                             {Correction::kTis, 1.5});
  ASSERT_TRUE(sums.ok());
  // -w A new_lp: -(1.25)(1) log 0.5 - (1)(1) log 0.25 - (1.5)(-1) log 0.8
  EXPECT_NEAR(sums->sum.item<double>(), -1.25 * std::log(0.5) - std::log(0.25) + 1.5 * std::log(0.8), 1e-6);
  EXPECT_NEAR(sums->weight_sum, 1.25 + 1 + 1.6, 1e-6);
  EXPECT_NEAR(sums->weight_max, 1.6, 1e-6);
  EXPECT_EQ(sums->capped, 1);
  EXPECT_EQ(sums->clipped, 0);
  sums->sum.backward();
  EXPECT_NEAR(c.new_lp.grad()[1][0].item<double>(), 1.5, 1e-6);  // -w A with w capped
}

TEST(PolicyLossTest, DecoupledPpoClipsAgainstTheProximalPolicy) {
  LossCase c = HandCase();
  // Proximal probabilities 0.45, 0.25, 0.6: r = new/prox = 1.111, 1, 1.333; w = prox/old = 1.125, 1, 1.2.
  at::Tensor prox = at::log(at::tensor({0.45f, 0.25f, 0.6f, 1.0f})).reshape({2, 2});
  auto sums = PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, LossNorm::kToken, at::Tensor(), 0,
                             {Correction::kDecoupled, 1.15}, prox);
  ASSERT_TRUE(sums.ok()) << sums.status().ToString();
  // -w min(r A, clamp(r) A): -1.125 * 1.111 (not clipped), -1 * 1, and 1.15 (capped) * 1.333 (A < 0:
  // the min takes the unclipped -1.333).
  EXPECT_NEAR(sums->sum.item<double>(), -1.125 * (0.5 / 0.45) - 1.0 + 1.15 * (0.8 / 0.6), 1e-5);
  EXPECT_EQ(sums->capped, 1);
  EXPECT_EQ(sums->clipped, 0);
  EXPECT_FALSE(PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, LossNorm::kToken, at::Tensor(), 0,
                              {Correction::kDecoupled, 2})
                   .ok())
      << "decoupled needs the proximal log-probabilities";
}

TEST(PolicyLossTest, KlTermIsTheK3EstimatorOnResponseTokens) {
  LossCase c = HandCase();
  at::Tensor ref = c.old_lp.clone();
  auto sums = PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, LossNorm::kToken, ref, 0.1);
  ASSERT_TRUE(sums.ok());
  double kl = 0.023143551314209754 + 0.0 + 0.09500362924573569;  // exp(d) - d - 1, d = ref - new
  EXPECT_NEAR(sums->kl, kl, 1e-6);
  EXPECT_NEAR(sums->sum.item<double>(), -0.6 + 0.1 * kl, 1e-6);
}

// k2: d^2 / 2 per token, with the gradient -d in new_lp (k3's is 1 - exp(d)); the policy term
// of each token is HandCase's (its gradient at [0][0] is 0, where the clip holds).
TEST(PolicyLossTest, KlTermCanBeTheK2Estimator) {
  LossCase c = HandCase();
  at::Tensor ref = c.old_lp.clone();
  auto sums = PolicyLossSums(c.new_lp, c.old_lp, c.mask, c.adv, 0.2, LossNorm::kToken, ref, 0.1, {}, {},
                             KlEstimator::kK2);
  ASSERT_TRUE(sums.ok());
  const double kl = 0.02489652224655867 + 0.0 + 0.11045170575208144;  // d^2 / 2, d = ref - new
  EXPECT_NEAR(sums->kl, kl, 1e-6);
  EXPECT_NEAR(sums->sum.item<double>(), -0.6 + 0.1 * kl, 1e-6);
  sums->sum.backward();
  at::Tensor g = c.new_lp.grad();
  EXPECT_NEAR(g[0][0].item<double>(), 0.1 * 0.2231435513142097, 1e-6);
  EXPECT_NEAR(g[0][1].item<double>(), -1.0, 1e-6);
  EXPECT_NEAR(g[1][0].item<double>(), 1.6 + 0.1 * 0.4700036292457356, 1e-6);
  EXPECT_NEAR(g[1][1].item<double>(), 0.0, 1e-6);  // masked
  EXPECT_EQ(ParseKlEstimator("k2").value(), KlEstimator::kK2);
  EXPECT_EQ(ParseKlEstimator("k3").value(), KlEstimator::kK3);
  EXPECT_FALSE(ParseKlEstimator("k1").ok());
}

TEST(TokenBatchTest, ResponseTokensArePredictedFromThePositionBefore) {
  Sample a{0, {1, 3, 4}, {5, 2}, {-0.5f, -0.25f}, 1, 0, {}, {}};
  Sample b{1, {1, 3}, {6}, {-1.0f}, 0, 0, {}, {}};
  TokenBatch t = MakeTokenBatch({&a, &b}, 0);
  EXPECT_TRUE(at::equal(t.tokens, at::tensor({1, 3, 4, 5, 2, 1, 3, 6, 0, 0}, at::kLong).reshape({2, 5})));
  EXPECT_TRUE(at::equal(t.mask, at::tensor({0.f, 0.f, 1.f, 1.f, 0.f, 1.f, 0.f, 0.f}).reshape({2, 4})));
  EXPECT_FLOAT_EQ(t.old_lp[0][3].item<float>(), -0.25f);
  EXPECT_FLOAT_EQ(t.old_lp[1][1].item<float>(), -1.0f);
}

// A multi-turn row's loss_mask zeroes the positions of its tool tokens, and GroupsOf reads it
// (refusing one of the wrong length or with values other than 0 and 1).
TEST(TokenBatchTest, ALossMaskLeavesToolTokensOut) {
  Sample a{0, {1, 3}, {17, 4, 18, 19, 5, 20, 5, 2}, std::vector<float>(8, -0.5f), 1, 0, {1, 1, 1, 0, 0, 0, 1, 1}, {}};
  TokenBatch t = MakeTokenBatch({&a}, 0);
  EXPECT_TRUE(at::equal(t.mask, at::tensor({0.f, 1.f, 1.f, 1.f, 0.f, 0.f, 0.f, 1.f, 1.f}).reshape({1, 9})));

  auto row = [](std::vector<int64_t> mask) {
    queue::GotRow r;
    r.index = 7;
    r.columns = {{"group", int64_t{1}},          {"prompt_ids", Tensor::FromI64({1, 3})},
                 {"response_ids", Tensor::FromI64({4, 5, 2})}, {"logprobs", Tensor::FromF32({-1, -1, -1})},
                 {"reward", 1.0},                {"version", int64_t{0}},
                 {"loss_mask", Tensor::FromI64(mask)}};
    return r;
  };
  auto ok = GroupsOf({row({1, 0, 1})});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ((*ok)[0].samples[0].loss_mask, (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(GroupsOf({row({1, 0})}).status().code(), Code::kDataError);
  EXPECT_EQ(GroupsOf({row({1, 2, 1})}).status().code(), Code::kDataError);
}

// A row with token_versions (rl-rollout --on-new-weights interrupt, or a conversation): GroupsOf
// reads them, takes the row's version as the oldest model token's when the column says newer,
// refuses a wrong length; TokenAgeOf counts the trained tokens older than the trainer's version.
TEST(TokenBatchTest, TokenVersionsGiveTheRowsOldestVersionAndTheTokensAge) {
  auto row = [](int64_t version, std::vector<int64_t> versions, std::vector<int64_t> mask) {
    queue::GotRow r;
    r.index = 7;
    r.columns = {{"group", int64_t{1}},          {"prompt_ids", Tensor::FromI64({1, 3})},
                 {"response_ids", Tensor::FromI64({4, 5, 2})}, {"logprobs", Tensor::FromF32({-1, -1, -1})},
                 {"reward", 1.0},                {"version", version},
                 {"loss_mask", Tensor::FromI64(mask)}, {"token_versions", Tensor::FromI64(versions)}};
    return r;
  };
  auto ok = GroupsOf({row(4, {3, 4, 5}, {1, 1, 1}), row(5, {-1, 5, 6}, {0, 1, 1})});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const std::vector<Sample>& s = (*ok)[0].samples;
  EXPECT_EQ(s[0].version, 3);  // the column said 4; its oldest token is 3
  EXPECT_EQ(s[1].version, 5);  // a tool token's -1 does not count
  EXPECT_EQ(s[0].token_versions, (std::vector<int64_t>{3, 4, 5}));
  const TokenAge age = TokenAgeOf(*ok, 5);
  EXPECT_EQ(age.tokens, 5);  // the tool token is not trained on
  EXPECT_EQ(age.older, 2);   // 3 and 4
  std::vector<Group> plain = *ok;
  for (Sample& x : plain[0].samples) x.token_versions.clear();
  EXPECT_EQ(TokenAgeOf(plain, 5).older, 3);  // without the column: the row's version for every token
  EXPECT_EQ(GroupsOf({row(4, {4, 4}, {1, 1, 1})}).status().code(), Code::kDataError);
}

// Routing replay: GroupsOf reads a row's routes column ([N, S, k], any integer dtype) against the
// trainer's model and refuses one of another shape, too long for the row, with an expert out of
// range or named twice; without limits (no --routing-replay) the column is not read. MakeTokenBatch
// lays the routes out per position, -1 past a row's N and in rows without routes.
TEST(TokenBatchTest, RoutesAreCheckedAgainstTheModelAndPaddedWithFreeRouting) {
  auto routes = [](DType dtype, std::vector<int64_t> shape, std::vector<int64_t> experts) {
    Tensor t = Tensor::FromI64(experts);
    if (dtype == DType::kU8) {
      t.dtype = DType::kU8;
      t.data.clear();
      for (int64_t e : experts) t.data.push_back(static_cast<char>(e));
    }
    t.shape = std::move(shape);
    return t;
  };
  auto row = [](uint64_t index, std::vector<int64_t> response, std::optional<Tensor> r) {
    queue::GotRow g;
    g.index = index;
    g.columns = {{"group", int64_t{1}},
                 {"prompt_ids", Tensor::FromI64({1, 3})},
                 {"response_ids", Tensor::FromI64(response)},
                 {"logprobs", Tensor::FromF32(std::vector<float>(response.size(), -1.0f))},
                 {"reward", 1.0},
                 {"version", int64_t{0}}};
    if (r) g.columns.push_back({"routes", *r});
    return g;
  };
  const RouteLimits limits{2, 2, 4};  // S = 2 sparse layers, k = 2 of E = 4 experts
  // 3 tokens fed (P + R - 1 = 2 + 2 - 1), routes for 2 of them.
  auto ok = GroupsOf({row(1, {4, 5}, routes(DType::kU8, {2, 2, 2}, {0, 1, 2, 3, 3, 0, 1, 2})), row(2, {6}, {})},
                     limits);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  const std::vector<Sample>& s = (*ok)[0].samples;
  EXPECT_EQ(s[0].routes, (std::vector<int32_t>{0, 1, 2, 3, 3, 0, 1, 2}));
  EXPECT_TRUE(s[1].routes.empty());
  auto refused = [&](Tensor r) {
    auto got = GroupsOf({row(9, {4, 5}, r)}, limits);
    EXPECT_EQ(got.status().code(), Code::kDataError) << got.status().ToString();
    return got.ok() ? std::string() : got.status().message();
  };
  EXPECT_NE(refused(routes(DType::kI64, {2, 4}, {0, 1, 2, 3, 3, 0, 1, 2})).find("row 9: column 'routes'"),
            std::string::npos);
  refused(routes(DType::kI64, {1, 3, 2}, {0, 1, 2, 3, 3, 0}));        // S = 3
  refused(routes(DType::kI64, {2, 2, 1}, {0, 1, 2, 3}));              // k = 1
  refused(routes(DType::kI64, {4, 2, 2}, std::vector<int64_t>(16, 0)));  // N = 4 > 3 fed tokens
  refused(routes(DType::kI64, {1, 2, 2}, {0, 1, 2, 4}));              // expert 4 of 4
  refused(routes(DType::kI64, {1, 2, 2}, {0, 1, -1, 2}));             // negative
  refused(routes(DType::kI64, {1, 2, 2}, {0, 1, 3, 3}));              // twice for one token
  Tensor floats = Tensor::FromF32({0, 1, 2, 3});
  floats.shape = {1, 2, 2};
  refused(floats);
  EXPECT_TRUE(GroupsOf({row(9, {4, 5}, routes(DType::kI64, {1, 3, 2}, {0, 1, 2, 3, 3, 0}))}).ok())
      << "without limits the column is not read";

  TokenBatch t = MakeTokenBatch({&s[0], &s[1]}, 0, {2, 2});
  ASSERT_TRUE(t.routes.defined());
  EXPECT_EQ(t.routes.sizes(), (std::vector<int64_t>{2, 4, 2, 2}));
  EXPECT_EQ(t.routes[0][1][1][0].item<int64_t>(), 1);  // token 1, layer 1
  EXPECT_EQ(t.routes[0][2][0][0].item<int64_t>(), -1);  // past N: free
  EXPECT_EQ(t.routes[1].max().item<int64_t>(), -1);     // a row without routes
  EXPECT_FALSE(MakeTokenBatch({&s[0], &s[1]}, 0).routes.defined()) << "no shape: no replay";
  EXPECT_FALSE(MakeTokenBatch({&s[1]}, 0, {2, 2}).routes.defined()) << "no row has routes";
}

// SFT's --result-open/--result-close: each span from the one through the other is masked, an
// unclosed one to the end.
TEST(SftTest, ToolResultMaskCoversEachResultSpan) {
  ToolResultTags tags{{19}, {20}};
  EXPECT_EQ(ToolResultMask({17, 4, 18, 19, 5, 6, 20, 5, 6, 2}, tags),
            (std::vector<int64_t>{1, 1, 1, 0, 0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(ToolResultMask({19, 5, 20, 19, 6}, tags), (std::vector<int64_t>{0, 0, 0, 0, 0}));
  EXPECT_EQ(ToolResultMask({4, 5}, tags), (std::vector<int64_t>{1, 1}));
  ToolResultTags multi{{7, 8}, {9, 9}};  // tags of several tokens
  EXPECT_EQ(ToolResultMask({7, 7, 8, 1, 9, 9, 3}, multi), (std::vector<int64_t>{1, 0, 0, 0, 0, 0, 1}));
}

Checkpoint Snapshot(GrpoTrainer* t, const std::mt19937_64& rng) {
  Checkpoint c;
  c.step = 1;
  c.version = 1;
  c.cursor = 77;
  c.consumed = {4, 5, 6};
  std::ostringstream r;
  r << rng;
  c.rng = r.str();
  c.model = t->policy().Clone().value();
  c.adam = t->optimizer().State();
  c.adam_steps = t->optimizer().steps();
  return c;
}

void ExpectSameTensors(const model::NamedTensors& a, const model::NamedTensors& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_TRUE(at::equal(a[i].second, b[i].second)) << a[i].first << " differs";
  }
}

TEST(CheckpointTest, RoundTripIsBitExact) {
  at::set_num_threads(1);
  auto trainer = NewTrainer(model::Transformer::Create(Tiny(), 3).value());
  TrainStep(trainer.get(), Batch(1));
  std::mt19937_64 rng(42);
  rng.discard(5);
  Checkpoint c = Snapshot(trainer.get(), rng);
  auto bytes = EncodeCheckpoint(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = DecodeCheckpoint(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameTensors(back->model->NamedParameters(), trainer->policy().NamedParameters());
  ExpectSameTensors(back->adam, trainer->optimizer().State());
  EXPECT_EQ(back->adam_steps, 1);
  EXPECT_EQ(back->consumed, (std::vector<uint64_t>{4, 5, 6}));
  EXPECT_EQ(back->cursor, 77u);
  std::mt19937_64 restored;
  std::istringstream(back->rng) >> restored;
  EXPECT_EQ(restored(), rng());
  EXPECT_EQ(back->model->config(), Tiny());
}

TEST(CheckpointTest, ResumedStepEqualsTheStepWithoutStopping) {
  at::set_num_threads(1);
  auto straight = NewTrainer(model::Transformer::Create(Tiny(), 5).value());
  TrainStep(straight.get(), Batch(1));
  auto bytes = EncodeCheckpoint(Snapshot(straight.get(), std::mt19937_64(1)));
  ASSERT_TRUE(bytes.ok());
  TrainStep(straight.get(), Batch(2));

  auto c = DecodeCheckpoint(*bytes);
  ASSERT_TRUE(c.ok());
  auto resumed = NewTrainer(*c->model);
  ASSERT_TRUE(resumed->optimizer().LoadState(c->adam, c->adam_steps).ok());
  TrainStep(resumed.get(), Batch(2));
  ExpectSameTensors(resumed->policy().NamedParameters(), straight->policy().NamedParameters());
  ExpectSameTensors(resumed->optimizer().State(), straight->optimizer().State());
}

// A policy trained in bfloat16 (with float32 masters) is checkpointed in bfloat16 with its masters
// and resumes in it: the step after the resume is the step the run would have taken, bit for bit. (Until the checkpoint kept the dtype,
// the resumed policy was float32: another run.) float16 cannot train on CPU (libtorch has no Half
// addmm there), so for it the test checks the round trip of the policy's dtype and bits.
TEST(CheckpointTest, ResumedBfloat16StepEqualsTheStepWithoutStopping) {
  at::set_num_threads(1);
  const model::DType dtype = model::DType::kBF16;
  auto straight = NewTrainer(model::Transformer::Create(Tiny(), 5, dtype).value());
  TrainStep(straight.get(), Batch(1));
  auto bytes = EncodeCheckpoint(Snapshot(straight.get(), std::mt19937_64(1)));
  ASSERT_TRUE(bytes.ok());
  TrainStep(straight.get(), Batch(2));

  auto file = model::DecodeSafetensors(*bytes);
  ASSERT_TRUE(file.ok());
  int masters = 0;
  for (const auto& [name, t] : file->tensors) {
    // The policy in its dtype; AdamW's moments and float32 masters (adamw.h) in float32.
    const bool policy = name.rfind("model.", 0) == 0;
    EXPECT_EQ(t.scalar_type(), policy ? at::kBFloat16 : at::kFloat) << name;
    masters += name.rfind("adam.master.", 0) == 0;
  }
  EXPECT_EQ(masters, static_cast<int>(straight->policy().NamedParameters().size()));
  auto c = DecodeCheckpoint(*bytes);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model->dtype(), dtype);
  auto resumed = NewTrainer(*c->model);
  ASSERT_TRUE(resumed->optimizer().LoadState(c->adam, c->adam_steps).ok());
  TrainStep(resumed.get(), Batch(2));
  EXPECT_EQ(resumed->policy().dtype(), dtype);
  ExpectSameTensors(resumed->policy().NamedParameters(), straight->policy().NamedParameters());
  ExpectSameTensors(resumed->optimizer().State(), straight->optimizer().State());
}

TEST(CheckpointTest, Float16PolicyComesBackInFloat16) {
  Checkpoint c;
  c.model = model::Transformer::Create(Tiny(), 5, model::DType::kF16).value();
  auto bytes = EncodeCheckpoint(c);
  ASSERT_TRUE(bytes.ok());
  auto back = DecodeCheckpoint(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->model->dtype(), model::DType::kF16);
  ExpectSameTensors(back->model->NamedParameters(), c.model->NamedParameters());
}

// Compares the accumulated gradients, not the weights after the step: Adam's first step moves a
// weight by about lr times the sign of its gradient, and some gradients are pure rounding noise
// (a key bias cannot change a softmax), so summation order alone flips them.

}  // namespace
}  // namespace rl::train
