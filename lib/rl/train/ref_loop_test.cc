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

// Rows the model refuses (a token outside its vocabulary of 15, more tokens than its context of
// 24) are consumed unscored: given back, they would be leased and refused again at once, forever.
// They never reach train; the good rows all do.
TEST(RefLoopTest, RowsTheModelRefusesAreDroppedNotGivenBackForever) {
  TestQueue q({{"ref", {"prompt_ids", "response_ids"}}, {"train", kTrainColumns}});
  queue::PutRequest bad;
  auto row = [](std::vector<int64_t> prompt, std::vector<int64_t> response) {
    const std::vector<float> lp(response.size(), -1.0f);
    return queue::ClientRow{std::nullopt,
                            {{"group", "bad"}, {"prompt_ids", Tensor::FromI64(prompt)},
                             {"response_ids", Tensor::FromI64(response)}, {"logprobs", Tensor::FromF32(lp)},
                             {"reward", 1.0}, {"version", int64_t{0}}}};
  };
  bad.rows.push_back(row({1, 3}, {4, 15}));
  bad.rows.push_back(row(std::vector<int64_t>(20, 3), std::vector<int64_t>(5, 4)));
  ASSERT_TRUE(q.Client().Put(bad).ok());
  PutRows(q);
  model::Transformer ref = model::Transformer::Create(Tiny(), 1).value();
  std::atomic<bool> stop{false};
  RefStats stats;
  ASSERT_TRUE(RunRefLoop(Options(q, 12), ref, stop, &stats).ok());
  EXPECT_EQ(stats.rows, 12u);
  EXPECT_EQ(stats.dropped, 2u);
  EXPECT_EQ(stats.failed, 0u);
  EXPECT_EQ(q.Task("ref")["consumed"], 14);
  EXPECT_EQ(q.Task("ref")["ready"], 0);
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

// rl-train score --routing-replay: a mixture-of-experts reference scores a row with the experts
// its routes name (as the trainer's policy and in-process reference do, so the KL term compares
// like with like); a row without routes, or with malformed ones (counted), with its own routing.
TEST(RefLoopTest, WithRoutingReplayTheReferenceScoresWithTheRowsExperts) {
  const model::ModelConfig c = model::testing::TinyConfig(model::Architecture::kQwen3Moe);
  model::Transformer ref = model::Transformer::Create(c, 5).value();
  model::testing::RandomizeWeights(&ref, 11);
  const int64_t layers = c.SparseLayerCount(), k = c.moe.num_experts_per_tok, experts = c.moe.num_experts;
  ASSERT_GT(layers, 0);
  TestQueue q({{"ref", {"prompt_ids", "response_ids"}}, {"done", {"prompt_ids", "response_ids", kRefColumn}}});
  std::mt19937_64 gen(3);
  queue::PutRequest put;
  std::vector<std::vector<int64_t>> replayed;  // per row: the routes it replays, empty for none
  for (int r = 0; r < 4; ++r) {
    const std::vector<int64_t> prompt = {1, 3 + r, 4}, response = {5, 6 + r % 3};
    const auto fed = static_cast<int64_t>(prompt.size() + response.size()) - 1;
    std::vector<int64_t> e;  // k distinct experts per token and layer: consecutive from a random one
    for (int64_t t = 0; t < fed * layers; ++t) {
      const auto first = static_cast<int64_t>(gen() % static_cast<uint64_t>(experts));
      for (int64_t j = 0; j < k; ++j) e.push_back((first + j) % experts);
    }
    if (r == 3) e[0] = experts;  // out of range: malformed
    queue::ClientRow row{std::nullopt, {{"prompt_ids", Tensor::FromI64(prompt)}, {"response_ids", Tensor::FromI64(response)}}};
    if (r != 2) {  // row 2 has no routes
      Tensor t = Tensor::FromI64(e);
      t.shape = {fed, layers, k};
      row.columns.push_back({"routes", t});
    }
    put.rows.push_back(std::move(row));
    replayed.push_back(r < 2 ? e : std::vector<int64_t>{});
  }
  ASSERT_TRUE(q.Client().Put(put).ok());
  RefLoopOptions o = Options(q, 4);
  o.routing_replay = true;
  std::atomic<bool> stop{false};
  RefStats stats;
  Status s = RunRefLoop(o, ref, stop, &stats);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(stats.rows, 4u);
  EXPECT_EQ(stats.unreplayable, 1u);
  queue::GetRequest g;
  g.task = "done";
  g.count = 4;
  g.also = {kRefRoutingColumn};
  auto got = q.Client().Get(g);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->rows.size(), 4u);
  c10::NoGradGuard no_grad;
  for (const queue::GotRow& row : got->rows) {
    const size_t r = row.index - got->rows.front().index;
    // How it routed, said beside the logprobs for a trainer to check against its own flag.
    const Value* routing = FindColumn(row.columns, kRefRoutingColumn);
    ASSERT_NE(routing, nullptr);
    EXPECT_EQ(std::get<std::string>(*routing), replayed[r].empty() ? "own" : "replayed") << "row " << r;
    Sample x;
    x.prompt_ids = std::get<Tensor>(*FindColumn(row.columns, "prompt_ids")).ToI64();
    x.response_ids = std::get<Tensor>(*FindColumn(row.columns, "response_ids")).ToI64();
    const std::vector<double> scored = std::get<Tensor>(*FindColumn(row.columns, kRefColumn)).ToF64();
    const std::vector<float> own = PlainLogprobs(ref, x, 0.7);
    ASSERT_EQ(scored.size(), own.size());
    if (replayed[r].empty()) {
      for (size_t j = 0; j < own.size(); ++j) EXPECT_NEAR(scored[j], own[j], 1e-5) << "row " << r;
      continue;
    }
    // One unpadded forward with the row's experts: [1, T, S, k], the last token's free (-1).
    std::vector<int64_t> ids = x.prompt_ids;
    ids.insert(ids.end(), x.response_ids.begin(), x.response_ids.end());
    const auto t = static_cast<int64_t>(ids.size());
    at::Tensor routes = at::full({1, t, layers, k}, -1, at::kLong);
    routes.narrow(1, 0, t - 1).copy_(at::tensor(replayed[r], at::kLong).view({1, t - 1, layers, k}));
    const at::Tensor logits = ref.Forward(at::tensor(ids, at::kLong).unsqueeze(0), {routes}).value();
    const at::Tensor logp = at::log_softmax(logits.to(at::kFloat) / 0.7, -1);
    double moved = 0;
    const auto p = static_cast<int64_t>(x.prompt_ids.size());
    for (size_t j = 0; j < own.size(); ++j) {
      EXPECT_NEAR(scored[j], logp[0][p + static_cast<int64_t>(j) - 1][x.response_ids[j]].item<double>(), 1e-5)
          << "row " << r;
      moved = std::max(moved, std::abs(scored[j] - own[j]));
    }
    EXPECT_GT(moved, 1e-3) << "row " << r << ": random experts should move its log-probabilities";
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
