// Data-parallel GRPO (grpo_data_parallel.cc): ranks that each train on their part of a batch, over a
// real Gloo group (threads of this test, lib/rl/dist/test_ranks.h), end the step with the weights
// one trainer gets from the whole batch, whatever the split, for each loss normalisation.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

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
  model::NamedTensors weights;
  StepStats stats;
};

Result1 OneRank(const std::vector<Group>& batch, LossNorm norm) {
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 5).value(), std::nullopt, Options(norm)).value();
  for (int step = 0; step < 2; ++step) {
    t->BeginStep();
    EXPECT_TRUE(t->Accumulate(batch).ok());
    auto s = t->FinishStep();
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (step == 1) return {t->policy().NamedParameters(), *s};
  }
  return {};
}

// Two steps on the same split: the second starts from weights and Adam moments the first made.
void ExpectRanksMatchOneRank(const std::vector<std::vector<Group>>& parts, LossNorm norm) {
  std::vector<Group> whole;
  for (const auto& p : parts) whole.insert(whole.end(), p.begin(), p.end());
  const Result1 want = OneRank(whole, norm);
  std::vector<Result1> got(parts.size());
  dist::testing::RunRanks(static_cast<int>(parts.size()), [&](dist::Group& g) {
    auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 5).value(), std::nullopt, Options(norm)).value();
    ASSERT_TRUE(t->SetGroup(&g).ok());
    for (int step = 0; step < 2; ++step) {
      t->BeginStep();
      if (!parts[g.rank()].empty()) {
        ASSERT_TRUE(t->Accumulate(parts[g.rank()]).ok());
      }
      auto s = t->FinishStep();
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      got[g.rank()] = {t->policy().NamedParameters(), *s};
    }
  });
  for (size_t r = 0; r < parts.size(); ++r) {
    ASSERT_EQ(got[r].weights.size(), want.weights.size());
    for (size_t i = 0; i < want.weights.size(); ++i) {
      const at::Tensor& a = want.weights[i].second;
      const at::Tensor& b = got[r].weights[i].second;
      EXPECT_TRUE(at::allclose(a, b, 1e-5, 1e-6)) << "rank " << r << " " << want.weights[i].first << " differs by "
                                                  << (a - b).abs().max().item<double>();
      // The ranks hold the same bits: they applied the same reduced gradient.
      EXPECT_TRUE(at::equal(b, got[0].weights[i].second)) << "rank " << r << " " << want.weights[i].first;
    }
    EXPECT_EQ(got[r].stats.samples, want.stats.samples);
    EXPECT_EQ(got[r].stats.groups, want.stats.groups);
    EXPECT_EQ(got[r].stats.tokens, want.stats.tokens);
    EXPECT_EQ(got[r].stats.min_version, want.stats.min_version);
    EXPECT_EQ(got[r].stats.max_version, want.stats.max_version);
    EXPECT_NEAR(got[r].stats.mean_reward, want.stats.mean_reward, 1e-12);
    EXPECT_NEAR(got[r].stats.loss, want.stats.loss, 1e-5);
    EXPECT_NEAR(got[r].stats.grad_norm, want.stats.grad_norm, 1e-4 * want.stats.grad_norm);
  }
}

TEST(DataParallelGrpoTest, TwoRanksTakeTheStepOfOneRankOnTheWholeBatch) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(5, 3);
  // Uneven on purpose: a token mean over each rank's own tokens would weigh them differently.
  for (LossNorm norm : {LossNorm::kToken, LossNorm::kSequence, LossNorm::kSequenceSumNorm}) {
    SCOPED_TRACE(static_cast<int>(norm));
    ExpectRanksMatchOneRank({{b[0]}, {b[1], b[2], b[3], b[4]}}, norm);
  }
}

TEST(DataParallelGrpoTest, ARankWithoutRowsStillTakesTheStep) {
  at::set_num_threads(1);
  std::vector<Group> b = Batch(3, 7);
  ExpectRanksMatchOneRank({{b[0], b[1]}, {b[2]}, {}}, LossNorm::kToken);
}

TEST(DataParallelGrpoTest, WholeBatchEstimatorsAreRefused) {
  GrpoOptions o = Options(LossNorm::kToken);
  o.minibatches = 2;
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 5).value(), std::nullopt, o).value();
  dist::testing::RunRanks(1, [&](dist::Group& g) {
    Status s = t->SetGroup(&g);
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_NE(s.message().find("one minibatch"), std::string::npos) << s.ToString();
  });
}

}  // namespace
}  // namespace rl::train
