// The reference model as a queue role (ref_loop.h) against a real rl-queue server in a thread:
// what it writes, against a plain forward pass; and the KL term a trainer computes from those rows,
// against the trainer's in-process reference model on the same rows.
#include "rl/train/ref_loop.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <gtest/gtest.h>

#include <random>

#include "rl/model/test_util.h"
#include "rl/queue/test_queue.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {
namespace {

using rl::testing::TestQueue;

const std::vector<std::string> kTrainColumns = {"prompt_ids", "response_ids", "logprobs", "reward", "version",
                                                kRefColumn};

model::ModelConfig Tiny() { return model::testing::TinyLlama(16, 32, 2, 2, 0, 24); }

// 3 groups of 4 rows as rl-rollout and rl-reward leave them: prompts and responses of different
// lengths (so batches pad), and a loss mask on some rows (a tool's tokens, not trained on).
void PutRows(TestQueue& q) {
  std::mt19937_64 gen(7);
  queue::PutRequest put;
  for (int g = 0; g < 3; ++g) {
    std::vector<int64_t> prompt = {1};
    for (int i = 0, n = 3 + g * 2; i < n; ++i) prompt.push_back(3 + int64_t(gen() % 11));
    for (int k = 0; k < 4; ++k) {
      std::vector<int64_t> response;
      std::vector<float> lp;
      for (int i = 0, n = 1 + static_cast<int>(gen() % 6); i < n; ++i) {
        response.push_back(3 + int64_t(gen() % 11));
        lp.push_back(-0.3f - 0.2f * float(gen() % 10));
      }
      queue::ClientRow row{std::nullopt,
                        {{"group", "g" + std::to_string(g)}, {"prompt_ids", Tensor::FromI64(prompt)},
                         {"response_ids", Tensor::FromI64(response)}, {"logprobs", Tensor::FromF32(lp)},
                         {"reward", static_cast<double>((g + k) % 2)}, {"version", int64_t{0}}}};
      if (k == 1 && response.size() > 1) {
        std::vector<int64_t> mask(response.size(), 1);
        mask[0] = 0;
        row.columns.push_back({"loss_mask", Tensor::FromI64(mask)});
      }
      put.rows.push_back(std::move(row));
    }
  }
  auto done = q.Client().Put(put);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
}

RefLoopOptions Options(const TestQueue& q, uint64_t max_rows) {
  RefLoopOptions o;
  o.client = q.Options();
  o.count = 5;  // gets cut across groups
  o.micro_batch = 3;
  o.temperature = 0.7;
  o.holder = "ref/0";
  o.wait_ms = 200;
  o.progress_ms = 0;
  o.max_rows = max_rows;
  return o;
}

// The train task's rows, whole groups, as the trainer decodes them.
std::vector<Group> TrainGroups(TestQueue& q) {
  queue::GetRequest g;
  g.task = "train";
  g.count = 12;
  g.groups = true;
  g.also = {"loss_mask"};
  auto got = q.Client().Get(g);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  if (!got.ok()) return {};
  EXPECT_EQ(got->rows.size(), 12u);
  auto groups = GroupsOf(got->rows);
  EXPECT_TRUE(groups.ok()) << groups.status().ToString();
  return groups.ok() ? *groups : std::vector<Group>();
}

// The reference log-probabilities computed another way: one unpadded sequence at a time, the full
// LM head, log_softmax(logits / T).
std::vector<float> PlainLogprobs(const model::Transformer& m, const Sample& s, double temperature) {
  c10::NoGradGuard no_grad;
  std::vector<int64_t> ids = s.prompt_ids;
  ids.insert(ids.end(), s.response_ids.begin(), s.response_ids.end());
  at::Tensor tokens = at::tensor(ids, at::kLong).unsqueeze(0);
  at::Tensor logp = at::log_softmax(m.Forward(tokens).value().to(at::kFloat) / temperature, -1);
  std::vector<float> out;
  const int64_t p = static_cast<int64_t>(s.prompt_ids.size());
  for (size_t j = 0; j < s.response_ids.size(); ++j) {
    out.push_back(logp[0][p + j - 1][s.response_ids[j]].item<float>());
  }
  return out;
}

TEST(RefLoopTest, RowsPutBeforeTheTaskExistsGetReferenceLogprobsOnceAndReachTrain) {
  // Task ref is declared by the role's first get, after the rows are in: train needs
  // ref_logprobs, so it keeps every row alive until the reference has scored it.
  TestQueue q({{"train", kTrainColumns}});
  PutRows(q);
  model::Transformer ref = model::Transformer::Create(Tiny(), 1).value();
  std::atomic<bool> stop{false};
  RefStats stats;
  Status s = RunRefLoop(Options(q, 12), ref, stop, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats.rows, 12u);
  EXPECT_EQ(stats.failed + stats.lost, 0u);
  EXPECT_EQ(q.Task("ref")["consumed"], 12);
  EXPECT_EQ(q.Task("ref")["ready"], 0);
  EXPECT_EQ(q.Task("train")["ready"], 12);
  int64_t tokens = 0;
  for (const Group& g : TrainGroups(q)) {
    for (const Sample& x : g.samples) {
      std::vector<float> want = PlainLogprobs(ref, x, 0.7);
      ASSERT_EQ(x.ref_logprobs.size(), want.size()) << "row " << x.index;
      for (size_t j = 0; j < want.size(); ++j) EXPECT_NEAR(x.ref_logprobs[j], want[j], 1e-5) << "row " << x.index;
      tokens += static_cast<int64_t>(want.size());
    }
  }
  EXPECT_EQ(static_cast<int64_t>(stats.tokens), tokens);
}

TEST(RefLoopTest, ARestartedRoleTakesBackAtOnceTheRowsItsPredecessorHeld) {
  TestQueue q({{"ref", {"prompt_ids", "response_ids"}}, {"train", kTrainColumns}});
  PutRows(q);
  queue::GetRequest dead;  // a role killed after its get: its lease would hold the rows a minute
  dead.task = "ref";
  dead.count = 12;
  dead.lease_ms = 60000;
  dead.holder = "ref/0";
  ASSERT_EQ(q.Client().Get(dead).value().rows.size(), 12u);
  model::Transformer ref = model::Transformer::Create(Tiny(), 1).value();
  std::atomic<bool> stop{false};
  RefStats stats;
  RefLoopOptions o = Options(q, 12);
  o.client.give_up_s = 5;
  ASSERT_TRUE(RunRefLoop(o, ref, stop, &stats).ok());
  EXPECT_EQ(stats.rows, 12u);
  EXPECT_EQ(q.Task("train")["ready"], 12);
}

// The same step, once with the reference model inside the trainer and once with the rows'
// ref_logprobs: the KL estimate, the loss and the updated weights agree to float rounding (the
// role's batches are padded differently from the trainer's micro-batches). Streaming and
// minibatch-epoch updates both.
TEST(RefLoopTest, KlFromTheRowsEqualsTheInProcessReferenceOnTheSameRows) {
  TestQueue q({{"train", kTrainColumns}});
  PutRows(q);
  model::Transformer ref = model::Transformer::Create(Tiny(), 1).value();
  std::atomic<bool> stop{false};
  ASSERT_TRUE(RunRefLoop(Options(q, 12), ref, stop).ok());
  std::vector<Group> groups = TrainGroups(q);
  model::Transformer policy = model::Transformer::Create(Tiny(), 2).value();
  for (int64_t minibatches : {1, 2}) {
    GrpoOptions o;
    o.schedule.lr = 1e-2;
    o.kl_coef = 0.5;
    o.temperature = 0.7;
    o.micro_batch = 2;
    o.minibatches = minibatches;
    o.epochs = minibatches;
    auto in_process = GrpoTrainer::Create(policy.Clone().value(), ref.Clone().value(), o);
    ASSERT_TRUE(in_process.ok()) << in_process.status().ToString();
    o.ref_from_rows = true;
    auto from_rows = GrpoTrainer::Create(policy.Clone().value(), std::nullopt, o);
    ASSERT_TRUE(from_rows.ok()) << from_rows.status().ToString();
    StepStats a, b;
    for (auto* t : {&*in_process, &*from_rows}) {
      (*t)->BeginStep();
      ASSERT_TRUE((*t)->Accumulate(groups).ok());
      auto stats = (*t)->FinishStep();
      ASSERT_TRUE(stats.ok()) << stats.status().ToString();
      (t == &*in_process ? a : b) = *stats;
    }
    EXPECT_GT(a.kl, 1e-3) << "the policy and the reference differ";
    EXPECT_NEAR(a.kl, b.kl, 1e-6 * std::max(1.0, std::abs(a.kl))) << minibatches;
    EXPECT_NEAR(a.loss, b.loss, 1e-6 * std::max(1.0, std::abs(a.loss))) << minibatches;
    auto pa = (*in_process)->policy().NamedParameters(), pb = (*from_rows)->policy().NamedParameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      // Adam divides by the gradient's own scale, so a weight whose gradient is near zero moves by
      // up to lr (1e-2) on float rounding alone: 1e-5 is a thousandth of one update (on one
      // machine's OpenBLAS a gate weight differed by 3.6e-6, over the 1e-6 this had before).
      EXPECT_TRUE(at::allclose(pa[i].second, pb[i].second, 1e-5, 1e-5))
          << pa[i].first << " (minibatches " << minibatches << ") differs by "
          << (pa[i].second - pb[i].second).abs().max().item<double>();
    }
  }
}

TEST(RefLoopTest, TrainingFromRowsWithoutRefLogprobsIsADataErrorNamingTheRow) {
  GrpoOptions o;
  o.kl_coef = 0.1;
  o.ref_from_rows = true;
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 2).value(), std::nullopt, o);
  ASSERT_TRUE(t.ok());
  Group g{"g", {}};
  for (int k = 0; k < 2; ++k) {
    Sample s;
    s.index = 40 + k;
    s.prompt_ids = {1, 4, 5};
    s.response_ids = {6, 2};
    s.logprobs = {-1.0f, -1.0f};
    s.reward = k;
    g.samples.push_back(s);
  }
  (*t)->BeginStep();
  Status s = (*t)->Accumulate({g});
  EXPECT_EQ(s.code(), Code::kDataError) << s.ToString();
  EXPECT_NE(s.message().find("row 40 has no column 'ref_logprobs'"), std::string::npos) << s.message();
  o.kl_coef = 0;
  EXPECT_EQ(GrpoTrainer::Create(model::Transformer::Create(Tiny(), 2).value(), std::nullopt, o).status().code(),
            Code::kInvalidArgument);
}

}  // namespace
}  // namespace rl::train
