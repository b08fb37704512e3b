// Data-parallel GRPO (grpo_data_parallel.cc): ranks that each train on their part of a batch, over a
// real Gloo group (threads of this test, lib/rl/dist/test_ranks.h), end the step with the weights
// one trainer gets from the whole batch, whatever the split: for each loss normalisation, over
// epochs, with whole-batch whitening and with a critic. Over several minibatches the ranks stay
// identical and take one trainer's number of updates on the same batch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <memory>
#include <mutex>
#include <random>

#include "rl/dist/test_ranks.h"
#include "rl/model/test_util.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {
namespace {

model::ModelConfig Tiny() { return model::testing::TinyLlama(16, 32, 1, 2, 0, 16); }

// Groups of 4 responses of different lengths (so that a split changes the ranks' token counts).
std::vector<Group> Batch(int groups, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Group> out;
  for (int g = 0; g < groups; ++g) {
    Group group{"i:" + std::to_string(g), {}};
    std::vector<int64_t> prompt = {1, 3 + int64_t(gen() % 10), 3 + int64_t(gen() % 10), 13};
    for (int k = 0; k < 4; ++k) {
      Sample s;
      s.prompt_ids = prompt;
      s.version = g;
      int n = 1 + static_cast<int>(gen() % 6);
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

GrpoOptions Options(LossNorm norm) {
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  o.adamw.weight_decay = 0.01;
  o.norm = norm;
  o.norm_constant = 8;
  o.micro_batch = 3;  // several micro-batches per rank
  return o;
}

struct Result1 {
  model::NamedTensors weights, critic;
  StepStats stats;
};

Result1 Take(GrpoTrainer& t, const StepStats& stats) {
  Result1 r{t.policy().NamedParameters(), {}, stats};
  if (t.critic()) r.critic = t.critic()->NamedParameters();
  return r;
}

Result1 OneRank(const std::vector<Group>& batch, const GrpoOptions& o) {
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 5).value(), std::nullopt, o).value();
  for (int step = 0; step < 2; ++step) {
    t->BeginStep();
    EXPECT_TRUE(t->Accumulate(batch).ok());
    auto s = t->FinishStep();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (step == 1) return Take(*t, *s);
  }
  return {};
}

// Two steps of `parts.size()` ranks, each on its part (the second step starts from the weights and
// Adam moments the first made).
std::vector<Result1> Ranks(const std::vector<std::vector<Group>>& parts, const GrpoOptions& o) {
  std::vector<Result1> got(parts.size());
  dist::testing::RunRanks(static_cast<int>(parts.size()), [&](dist::Group& g) {
    auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 5).value(), std::nullopt, o).value();
    ASSERT_TRUE(t->SetGroup(&g).ok());
    for (int step = 0; step < 2; ++step) {
      t->BeginStep();
      if (!parts[g.rank()].empty()) {
        ASSERT_TRUE(t->Accumulate(parts[g.rank()]).ok());
      }
      auto s = t->FinishStep();
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      got[g.rank()] = Take(*t, *s);
    }
  });
  return got;
}

// Adam divides by each gradient's own scale, so a weight whose gradient is near zero moves by up
// to lr (1e-2 for the policy, 5e-3 for the critic below) on float rounding alone: the ranks' sums
// round otherwise than one trainer's, and 1e-5 absolute is a five-hundredth of one update (on one
// machine's OpenBLAS a critic gate weight differed by 1.4e-6, over the 1e-6 this had before).
void ExpectClose(const model::NamedTensors& want, const model::NamedTensors& got, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const at::Tensor &a = want[i].second, &b = got[i].second;
    EXPECT_TRUE(at::allclose(a, b, 1e-5, 1e-5))
        << what << " " << want[i].first << " differs by " << (a - b).abs().max().item<double>();
  }
}

// The ranks hold the same bits: they applied the same reduced gradients.
void ExpectRanksEqual(const std::vector<Result1>& got) {
  for (size_t r = 1; r < got.size(); ++r) {
    for (size_t i = 0; i < got[0].weights.size(); ++i) {
      EXPECT_TRUE(at::equal(got[r].weights[i].second, got[0].weights[i].second)) << "rank " << r << " "
                                                                                 << got[0].weights[i].first;
    }
    ASSERT_EQ(got[r].critic.size(), got[0].critic.size());
    for (size_t i = 0; i < got[0].critic.size(); ++i) {
      EXPECT_TRUE(at::equal(got[r].critic[i].second, got[0].critic[i].second)) << "rank " << r << " critic "
                                                                               << got[0].critic[i].first;
    }
  }
}

void ExpectSameBatch(const StepStats& got, const StepStats& want) {
  EXPECT_EQ(got.samples, want.samples);
  EXPECT_EQ(got.groups, want.groups);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.updates, want.updates);
  EXPECT_EQ(got.min_version, want.min_version);
  EXPECT_EQ(got.max_version, want.max_version);
  EXPECT_NEAR(got.mean_reward, want.mean_reward, 1e-12);
}

void ExpectRanksMatchOneRank(const std::vector<std::vector<Group>>& parts, const GrpoOptions& o) {
  std::vector<Group> whole;
  for (const auto& p : parts) whole.insert(whole.end(), p.begin(), p.end());
  const Result1 want = OneRank(whole, o);
  const std::vector<Result1> got = Ranks(parts, o);
  ExpectRanksEqual(got);
  for (size_t r = 0; r < parts.size(); ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    ExpectClose(want.weights, got[r].weights, "policy");
    ExpectClose(want.critic, got[r].critic, "critic");
    ExpectSameBatch(got[r].stats, want.stats);
    EXPECT_NEAR(got[r].stats.loss, want.stats.loss, 1e-5);
    EXPECT_NEAR(got[r].stats.grad_norm, want.stats.grad_norm, 1e-4 * want.stats.grad_norm);
    EXPECT_NEAR(got[r].stats.value_loss, want.stats.value_loss, 1e-5);
    EXPECT_NEAR(got[r].stats.clip_fraction, want.stats.clip_fraction, 1e-6);
    EXPECT_NEAR(got[r].stats.sft_loss, want.stats.sft_loss, 1e-5);
  }
}

TEST(DataParallelGrpoTest, TwoRanksTakeTheStepOfOneRankOnTheWholeBatch) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(5, 3);
  // Uneven on purpose: a token mean over each rank's own tokens would weigh them differently.
  for (LossNorm norm : {LossNorm::kToken, LossNorm::kSequence, LossNorm::kSequenceSumNorm}) {
    SCOPED_TRACE(static_cast<int>(norm));
    ExpectRanksMatchOneRank({{b[0]}, {b[1], b[2], b[3], b[4]}}, Options(norm));
  }
}

TEST(DataParallelGrpoTest, ARankWithoutRowsStillTakesTheStep) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(3, 7);
  ExpectRanksMatchOneRank({{b[0], b[1]}, {b[2]}, {}}, Options(LossNorm::kToken));
}

// Epochs over one minibatch: each update's ratio is against the rows' log-probabilities, so the
// second moves the clip (PPO); on ranks, the same two updates as one trainer's.
TEST(DataParallelGrpoTest, EpochsOnRanksAreTheUpdatesOfOneTrainer) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(4, 11);
  GrpoOptions o = Options(LossNorm::kToken);
  o.epochs = 3;
  o.off = {Correction::kDecoupled, 2.0};
  ExpectRanksMatchOneRank({{b[0], b[1], b[2]}, {b[3]}}, o);
}

// Whitening over the batch: a rank's own mean and variance would give its advantages another scale.
TEST(DataParallelGrpoTest, WholeBatchEstimatorsWhitenOverEveryRank) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(5, 5);
  for (Advantage a : {Advantage::kReinforcePP, Advantage::kReinforcePPBaseline}) {
    SCOPED_TRACE(AdvantageName(a));
    GrpoOptions o = Options(LossNorm::kToken);
    o.advantage = a;
    ExpectRanksMatchOneRank({{b[0], b[1]}, {b[2], b[3], b[4]}, {}}, o);
  }
}

// PPO with a critic: GAE on each rank's samples, whitened over the batch, and the critic's
// gradients summed as the policy's; its weights end where one trainer's do.
TEST(DataParallelGrpoTest, PpoWithACriticOnRanksMatchesOneTrainer) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(4, 13);
  GrpoOptions o = Options(LossNorm::kToken);
  o.advantage = Advantage::kGae;
  o.gamma = 0.99;
  o.lambda = 0.95;
  o.critic_lr = 5e-3;
  o.epochs = 2;
  ExpectRanksMatchOneRank({{b[0]}, {b[1], b[2], b[3]}}, o);
}

// The SFT mix: each rank backpropagates its share of every update's examples, scaled by the whole
// batch's tokens and the loss's denominator over every rank, so the sum is one trainer's mix; over
// epochs too (each update its own examples, by the optimizer's step count).
TEST(DataParallelGrpoTest, AnSftMixOnRanksIsOneTrainersMix) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(4, 19);
  auto examples = std::make_shared<std::vector<Sample>>();
  for (const Group& g : Batch(2, 23)) examples->insert(examples->end(), g.samples.begin(), g.samples.end());
  examples->resize(7);  // 7 per update: 3, 2 and 2 on three ranks
  for (int64_t epochs : {1, 2}) {
    for (LossNorm norm : {LossNorm::kToken, LossNorm::kSequence}) {
      SCOPED_TRACE("epochs " + std::to_string(epochs) + " norm " + std::to_string(static_cast<int>(norm)));
      GrpoOptions o = Options(norm);
      o.epochs = epochs;
      o.sft_coef = 0.3;
      o.sft_batch = 7;
      o.sft_examples = examples;
      ExpectRanksMatchOneRank({{b[0]}, {b[1], b[2]}, {b[3]}}, o);
      EXPECT_GT(OneRank({b[0]}, o).stats.sft_loss, 0);  // so that the match above is of something
    }
  }
}

// Several minibatches: each rank splits its own samples, so the minibatches are not one
// trainer's (another random order), but the ranks take as many updates as it, on the same batch,
// and stay identical; a rank with fewer samples than minibatches joins every update.
TEST(DataParallelGrpoTest, MinibatchesOnRanksKeepTheRanksIdentical) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(4, 17);
  GrpoOptions o = Options(LossNorm::kToken);
  o.advantage = Advantage::kGae;
  o.minibatches = 6;
  o.epochs = 2;
  const std::vector<std::vector<Group>> parts = {{b[0], b[1], b[2]}, {b[3]}};  // rank 1: 4 samples
  std::vector<Group> whole = {b[0], b[1], b[2], b[3]};
  const Result1 want = OneRank(whole, o);
  const std::vector<Result1> got = Ranks(parts, o);
  ExpectRanksEqual(got);
  EXPECT_EQ(want.stats.updates, 12);
  auto before = model::Transformer::Create(Tiny(), 5).value().NamedParameters();
  for (const Result1& r : got) {
    ExpectSameBatch(r.stats, want.stats);
    // Both moved about as far from the start as one trainer's (the same number of updates at the
    // same rate), and not along another path entirely.
    double moved = 0, moved_one = 0;
    for (size_t i = 0; i < before.size(); ++i) {
      moved += (r.weights[i].second - before[i].second).pow(2).sum().item<double>();
      moved_one += (want.weights[i].second - before[i].second).pow(2).sum().item<double>();
    }
    EXPECT_GT(moved, 0.5 * moved_one);
    EXPECT_LT(moved, 2.0 * moved_one);
  }
}

}  // namespace
}  // namespace rl::train
