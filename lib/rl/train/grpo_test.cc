// GRPO arithmetic against hand-computed values, and checkpoints: a bit-exact round trip and a
// resumed step equal to an uninterrupted one.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
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

namespace rl::train {
namespace {

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

model::ModelConfig Tiny() { return model::testing::TinyLlama(16, 32, 1, 2, 0, 16); }

std::vector<Group> Batch(uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Group> out;
  for (int g = 0; g < 3; ++g) {
    Group group{"i:" + std::to_string(g), {}};
    std::vector<int64_t> prompt = {1, 3 + int64_t(gen() % 10), 3 + int64_t(gen() % 10), 13, 3 + int64_t(gen() % 10), 14};
    for (int k = 0; k < 4; ++k) {
      Sample s;
      s.prompt_ids = prompt;
      int n = 1 + static_cast<int>(gen() % 3);
      for (int i = 0; i < n; ++i) s.response_ids.push_back(3 + int64_t(gen() % 10));
      s.response_ids.push_back(2);
      for (size_t i = 0; i < s.response_ids.size(); ++i) s.logprobs.push_back(-0.5f - 0.1f * float(gen() % 20));
      s.reward = static_cast<double>(gen() % 2);
      group.samples.push_back(std::move(s));
    }
    out.push_back(std::move(group));
  }
  return out;
}

// The batch as multi-turn rows: a first turn ending after the first token (reward -0.25, 0 or 0.5)
// when there is room, the answer turn to the end (reward 0), and on every fourth sample an
// unknown end first (its reward must count for nothing).
std::vector<Group> WithTurns(std::vector<Group> batch, uint64_t seed) {
  std::mt19937_64 gen(seed * 7 + 1);
  for (Group& g : batch) {
    for (size_t i = 0; i < g.samples.size(); ++i) {
      Sample& s = g.samples[i];
      const auto n = static_cast<int64_t>(s.response_ids.size());
      if (i % 4 == 3) {
        s.turn_ends.push_back(-1);
        s.turn_rewards.push_back(0.3f);
      }
      if (n >= 2) {
        s.turn_ends.push_back(1);
        s.turn_rewards.push_back(std::vector<float>{-0.25f, 0.0f, 0.5f}[gen() % 3]);
      }
      s.turn_ends.push_back(n);
      s.turn_rewards.push_back(0.0f);
    }
  }
  return batch;
}

std::unique_ptr<GrpoTrainer> NewTrainer(model::Transformer m) {
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  o.adamw.weight_decay = 0.01;
  auto t = GrpoTrainer::Create(std::move(m), std::nullopt, o);
  EXPECT_TRUE(t.ok());
  return std::move(*t);
}

void TrainStep(GrpoTrainer* t, const std::vector<Group>& batch) {
  t->BeginStep();
  const Status st = t->Accumulate(batch);
  ASSERT_TRUE(st.ok()) << st.ToString();
  auto s = t->FinishStep();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
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

// A policy trained in bfloat16 is checkpointed in bfloat16 and resumes in it: the step after the
// resume is the step the run would have taken, bit for bit. (Until the checkpoint kept the dtype,
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
  for (const auto& [name, t] : file->tensors) EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
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
TEST(GrpoTrainerTest, PiecesOfABatchAccumulateTheSameGradientAsTheWhole) {
  at::set_num_threads(1);
  auto whole = NewTrainer(model::Transformer::Create(Tiny(), 9).value());
  auto pieces = NewTrainer(model::Transformer::Create(Tiny(), 9).value());
  std::vector<Group> batch = Batch(3);
  whole->BeginStep();
  ASSERT_TRUE(whole->Accumulate(batch).ok());
  pieces->BeginStep();
  for (const Group& g : batch) ASSERT_TRUE(pieces->Accumulate({g}).ok());
  auto a = whole->policy().NamedParameters(), b = pieces->policy().NamedParameters();
  double largest = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].second.grad().defined()) << a[i].first;
    largest = std::max(largest, a[i].second.grad().abs().max().item<double>());
    EXPECT_TRUE(at::allclose(a[i].second.grad(), b[i].second.grad(), 1e-4, 1e-6)) << a[i].first;
  }
  EXPECT_GT(largest, 1e-3);  // the batch did produce a gradient
  EXPECT_TRUE(whole->FinishStep().ok());
  EXPECT_TRUE(pieces->FinishStep().ok());
}

std::unique_ptr<GrpoTrainer> EpochTrainer(int64_t minibatches, int64_t epochs, uint64_t seed = 0) {
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  o.minibatches = minibatches;
  o.epochs = epochs;
  o.seed = seed;
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 6).value(), std::nullopt, o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return std::move(*t);
}

// Two epochs of one minibatch are two updates on the same batch, each with the ratio against the
// generation's log-probabilities: what two plain steps on that batch compute.
TEST(GrpoTrainerTest, EpochsAreRepeatedUpdatesAgainstTheGenerationLogprobs) {
  at::set_num_threads(1);
  auto epochs = EpochTrainer(1, 2), plain = EpochTrainer(1, 1);
  std::vector<Group> batch = Batch(7);
  epochs->BeginStep();
  ASSERT_TRUE(epochs->Accumulate({batch[0], batch[1]}).ok());  // in pieces, as streaming delivers
  ASSERT_TRUE(epochs->Accumulate({batch[2]}).ok());
  auto stats = epochs->FinishStep();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->updates, 2);
  EXPECT_EQ(epochs->optimizer().steps(), 2);
  TrainStep(plain.get(), batch);
  TrainStep(plain.get(), batch);
  auto a = epochs->policy().NamedParameters(), b = plain->policy().NamedParameters();
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::allclose(a[i].second, b[i].second, 1e-5, 1e-6)) << a[i].first;
  }
}

TEST(GrpoTrainerTest, MinibatchesTakeOneStepEachInASeededOrder) {
  at::set_num_threads(1);
  std::vector<Group> batch = Batch(8);
  int64_t tokens = 0;
  for (const Group& g : batch) {
    for (const Sample& s : g.samples) tokens += static_cast<int64_t>(s.response_ids.size());
  }
  auto run = [&](uint64_t seed) {
    auto t = EpochTrainer(3, 2, seed);
    t->BeginStep();
    EXPECT_TRUE(t->Accumulate(batch).ok());
    auto stats = t->FinishStep();
    EXPECT_TRUE(stats.ok());
    EXPECT_EQ(stats->updates, 6);
    EXPECT_EQ(stats->tokens, tokens);  // the batch's tokens, not six minibatches' worth
    EXPECT_EQ(t->optimizer().steps(), 6);
    EXPECT_GT(stats->clip_fraction, 0);  // later updates move the ratio past the clip range
    return t;
  };
  auto a = run(1), b = run(1), c = run(2);
  bool differs = false;
  auto pa = a->policy().NamedParameters(), pb = b->policy().NamedParameters(), pc = c->policy().NamedParameters();
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_TRUE(at::equal(pa[i].second, pb[i].second)) << pa[i].first;
    differs = differs || !at::equal(pa[i].second, pc[i].second);
  }
  EXPECT_TRUE(differs) << "another seed, another minibatch order";
}

// Rows whose log-probabilities the policy itself recorded at temperature 0.7: a trainer at 0.7
// finds them where it is (gap ~0), one at temperature 1 does not.
TEST(GrpoTrainerTest, TheLogprobGapShowsATemperatureMismatch) {
  at::set_num_threads(1);
  model::Transformer policy = model::Transformer::Create(Tiny(), 21).value();
  model::testing::ScaleWeights(&policy, 3.0);
  std::vector<Group> batch = Batch(5);
  for (Group& g : batch) {
    for (Sample& s : g.samples) {
      TokenBatch tb = MakeTokenBatch({&s}, 0);
      at::Tensor lp = TokenLogprobs(policy, tb.tokens, tb.mask, 0.7).value();
      int64_t p = static_cast<int64_t>(s.prompt_ids.size());
      for (size_t j = 0; j < s.response_ids.size(); ++j) s.logprobs[j] = lp[0][p + j - 1].item<float>();
    }
  }
  for (double t : {0.7, 1.0}) {
    GrpoOptions o;
    o.temperature = t;
    o.minibatches = t == 1.0 ? 2 : 1;  // both paths report it
    auto trainer = GrpoTrainer::Create(policy.Clone().value(), std::nullopt, o);
    ASSERT_TRUE(trainer.ok());
    (*trainer)->BeginStep();
    ASSERT_TRUE((*trainer)->Accumulate(batch).ok());
    auto stats = (*trainer)->FinishStep();
    ASSERT_TRUE(stats.ok());
    if (t == 0.7) {
      EXPECT_LT(stats->logprob_gap, 1e-5);
    } else {
      EXPECT_GT(stats->logprob_gap, 1e-2);
    }
  }
}

TEST(GrpoTrainerTest, BadUpdateOptionsAreRefused) {
  GrpoOptions o;
  o.minibatches = 0;
  EXPECT_FALSE(GrpoTrainer::Create(model::Transformer::Create(Tiny(), 1).value(), std::nullopt, o).ok());
  o = GrpoOptions();
  o.temperature = 0;
  EXPECT_FALSE(GrpoTrainer::Create(model::Transformer::Create(Tiny(), 1).value(), std::nullopt, o).ok());
  o = GrpoOptions();
  o.norm = LossNorm::kSequenceSumNorm;
  EXPECT_FALSE(GrpoTrainer::Create(model::Transformer::Create(Tiny(), 1).value(), std::nullopt, o).ok());
  o.norm_constant = 64;
  EXPECT_TRUE(GrpoTrainer::Create(model::Transformer::Create(Tiny(), 1).value(), std::nullopt, o).ok());
}

int RunLossReference(const std::string& dir) {
  std::string cmd = model::testing::TorchPython() + " " RL_SOURCE_DIR "/tests/reference/grpo_loss_reference.py " + dir;
  int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

// The dumped tensors of real steps, recomputed by tests/reference/grpo_loss_reference.py
// (python3-torch, from the public definitions): advantages, PPO-clip with the k3 KL term, and
// each aggregation, streaming and over minibatch epochs.
TEST(GrpoTrainerTest, DumpedStepsAgreeWithTheIndependentReference) {
  if (model::testing::TorchPython().empty()) GTEST_SKIP() << "no python3 with torch: reference not run";
  at::set_num_threads(1);
  const std::string root = ::testing::TempDir() + "/grpo_dump." + std::to_string(::getpid());
  struct Case {
    std::string name;
    LossNorm norm;
    int64_t minibatches, epochs;
    double kl;
    Correction correction = Correction::kNone;
    Advantage advantage = Advantage::kGrpo;
    bool turns = false;  // multi-turn rows with turn rewards
  };
  const std::vector<Case> cases = {{"token-kl", LossNorm::kToken, 1, 1, 0.1},
                                   {"seqmean-epochs", LossNorm::kSequence, 2, 2, 0},
                                   {"seqsumnorm-kl-epochs", LossNorm::kSequenceSumNorm, 3, 1, 0.05},
                                   {"tis", LossNorm::kToken, 1, 1, 0, Correction::kTis},
                                   {"decoupled-kl-epochs", LossNorm::kToken, 2, 2, 0.1, Correction::kDecoupled},
                                   {"decoupled-streaming", LossNorm::kSequence, 1, 1, 0, Correction::kDecoupled},
                                   {"rloo-streaming", LossNorm::kToken, 1, 1, 0, Correction::kNone, Advantage::kRloo},
                                   {"reinforce++", LossNorm::kToken, 1, 1, 0, Correction::kNone,
                                    Advantage::kReinforcePP},
                                   {"reinforce++-baseline-epochs", LossNorm::kSequence, 2, 2, 0, Correction::kNone,
                                    Advantage::kReinforcePPBaseline},
                                   {"gae-kl-epochs", LossNorm::kToken, 2, 2, 0.1, Correction::kNone, Advantage::kGae},
                                   {"gae-decoupled", LossNorm::kToken, 3, 1, 0, Correction::kDecoupled,
                                    Advantage::kGae},
                                   {"grpo-turns", LossNorm::kToken, 1, 1, 0, Correction::kNone, Advantage::kGrpo, true},
                                   {"grpo-turns-epochs", LossNorm::kSequence, 2, 2, 0, Correction::kNone,
                                    Advantage::kGrpo, true},
                                   {"gae-turns", LossNorm::kToken, 2, 1, 0, Correction::kNone, Advantage::kGae, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GrpoOptions o;
    o.schedule.lr = 3e-2;  // large, so that later updates move the ratio past the clip range
    o.norm = c.norm;
    o.norm_constant = 8;
    o.minibatches = c.minibatches;
    o.epochs = c.epochs;
    o.kl_coef = c.kl;
    o.temperature = 0.8;
    o.micro_batch = 5;  // several pieces per update
    o.off = {c.correction, 1.5};
    o.advantage = c.advantage;
    o.gamma = 0.99;
    o.lambda = 0.9;
    o.value_clip = 0.05;  // small, so that the clip acts from the second update on
    o.critic_lr = 5e-2;
    o.dump_dir = root + "/" + c.name;
    model::Transformer policy = model::Transformer::Create(Tiny(), 12).value();
    std::optional<model::Transformer> ref;
    if (c.kl > 0) ref = policy.Clone().value();
    auto t = GrpoTrainer::Create(std::move(policy), std::move(ref), o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    for (uint64_t step = 1; step <= 2; ++step) TrainStep(t->get(), c.turns ? WithTurns(Batch(step), step) : Batch(step));
    EXPECT_EQ(RunLossReference(o.dump_dir), 0);
    if (c.turns && c.advantage == Advantage::kGrpo) {
      // The turn rewards acted: some response's tokens have different advantages.
      auto batch = model::ReadSafetensorsFile(o.dump_dir + "/step-0-batch.safetensors");
      ASSERT_TRUE(batch.ok());
      at::Tensor adv, lengths;
      for (auto& [name, x] : batch->tensors) {
        if (name == "token_adv") adv = x;
        if (name == "lengths") lengths = x;
      }
      bool varies = false;
      for (int64_t i = 0; i < adv.size(0); ++i) {
        const auto n = static_cast<int64_t>(lengths[i].item<float>());
        if (n >= 2 && std::abs(adv[i][0].item<float>() - adv[i][n - 1].item<float>()) > 1e-3) varies = true;
      }
      EXPECT_TRUE(varies);
    }
    if (c.advantage == Advantage::kGae) {
      // The check means something: the critic learned in step 0 (step 1's V_old are not all 0)
      // and its clip acted.
      auto batch = model::ReadSafetensorsFile(o.dump_dir + "/step-1-batch.safetensors");
      ASSERT_TRUE(batch.ok());
      at::Tensor values;
      for (auto& [name, x] : batch->tensors) {
        if (name == "values") values = x;
      }
      ASSERT_TRUE(values.defined());
      EXPECT_GT(values.abs().max().item<float>(), 1e-3);
      double clipped = 0;
      for (const auto& entry : std::filesystem::directory_iterator(o.dump_dir)) {
        if (entry.path().string().find("piece") == std::string::npos) continue;
        clipped += std::stod(model::ReadSafetensorsFile(entry.path().string())->metadata["value_clipped"]);
      }
      EXPECT_GT(clipped, 0);
    }
  }
  // The reference does disagree with a wrong value.
  const std::string piece = root + "/token-kl/step-1-update-0-piece-0.safetensors";
  auto contents = model::ReadSafetensorsFile(piece);
  ASSERT_TRUE(contents.ok()) << contents.status().ToString();
  contents->metadata["sum"] = std::to_string(std::stod(contents->metadata["sum"]) + 0.01);
  ASSERT_TRUE(model::WriteSafetensorsFile(piece, contents->tensors, contents->metadata).ok());
  EXPECT_EQ(RunLossReference(root + "/token-kl"), 1);
  std::filesystem::remove_all(root);
}

// The trainer steps with the schedule's rate for its optimizer's step count, resumed or not.
TEST(GrpoTrainerTest, StepsFollowTheLearningRateScheduleAcrossAResume) {
  at::set_num_threads(1);
  GrpoOptions o;
  o.schedule = {1e-2, 2, LrDecay::kCosine, 6, 0.1};
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 4).value(), std::nullopt, o);
  ASSERT_TRUE(t.ok());
  std::vector<double> used;
  auto step = [&used](GrpoTrainer* trainer, uint64_t seed) {
    trainer->BeginStep();
    ASSERT_TRUE(trainer->Accumulate(Batch(seed)).ok());
    auto stats = trainer->FinishStep();
    ASSERT_TRUE(stats.ok());
    used.push_back(stats->lr);
  };
  for (int s = 0; s < 4; ++s) step(t->get(), s + 1);
  auto resumed = GrpoTrainer::Create((*t)->policy().Clone().value(), std::nullopt, o);
  ASSERT_TRUE(resumed.ok());
  ASSERT_TRUE((*resumed)->optimizer().LoadState((*t)->optimizer().State(), (*t)->optimizer().steps()).ok());
  for (int s = 4; s < 7; ++s) step(resumed->get(), s + 1);
  // warm-up 0.5 and 1 (x 1e-2), then cosine over 4 steps to the floor 0.1 at step 6.
  const double half = 0.1 + 0.9 * (1 + std::cos(M_PI / 4)) / 2, low = 0.1 + 0.9 * (1 + std::cos(3 * M_PI / 4)) / 2;
  std::vector<double> want = {0.5, 1, 1, half, 0.55, low, 0.1};
  ASSERT_EQ(used.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(used[i], 1e-2 * want[i], 1e-12) << "step " << i + 1;
}

}  // namespace
}  // namespace rl::train
