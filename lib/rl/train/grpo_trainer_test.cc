// GrpoTrainer's steps: accumulation in pieces, minibatch epochs, the log-probability gap, option
// checks, dumps checked by the independent reference, the learning-rate schedule across a resume,
// and frozen parameters.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <random>

#include "rl/model/hf_reference.h"
#include "rl/model/safetensors.h"
#include "rl/train/grpo_test_util.h"
#include "rl/train/grpo_trainer.h"
#include "rl/train/value_model.h"

namespace rl::train {
namespace {

using namespace grpo_fixture;

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

// A NaN in the batch (a recorded logprob here; rows are checked for that, a rate far too high gets
// there too) makes the gradient NaN, which no clip scales down: the update is skipped and counted,
// the weights stay as they were, and the next step trains as usual.
TEST(GrpoTrainerTest, AnUpdateWhoseGradientIsNotFiniteIsSkipped) {
  auto t = NewTrainer(model::Transformer::Create(Tiny(), 9).value());
  std::vector<Group> batch = Batch(3);
  for (Sample& s : batch[0].samples) s.logprobs[0] = std::nanf("");
  model::NamedTensors before;
  for (const auto& [name, p] : t->policy().NamedParameters()) before.emplace_back(name, p.detach().clone());
  t->BeginStep();
  ASSERT_TRUE(t->Accumulate(batch).ok());
  auto stats = t->FinishStep();
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->skipped_updates, 1);
  const model::NamedTensors after = t->policy().NamedParameters();
  for (size_t i = 0; i < after.size(); ++i) EXPECT_TRUE(at::equal(before[i].second, after[i].second)) << after[i].first;
  t->BeginStep();
  ASSERT_TRUE(t->Accumulate(Batch(3)).ok());
  stats = t->FinishStep();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->skipped_updates, 0);
  EXPECT_TRUE(std::isfinite(stats->grad_norm));
  EXPECT_FALSE(at::equal(before[0].second, t->policy().NamedParameters()[0].second)) << "the next step trains";
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

// Routing replay (R3) on a mixture of experts whose rollout engine's routers differ a little
// from the trainer's (as other kernels or precision make them): rows carry the rollout's
// log-probabilities and routes. Replayed, the trainer's tokens use the rollout's experts, so its
// log-probabilities come closer to the rollout's than when it routes freely, and it reports how
// often its own routers agreed. The rollout's own weights, replayed, find its log-probabilities.
TEST(GrpoTrainerTest, RoutingReplayClosesTheGapTheRoutersMake) {
  at::set_num_threads(1);
  const model::ModelConfig c = model::testing::TinyConfig(model::Architecture::kQwen3Moe);
  model::Transformer trainer_weights = model::Transformer::Create(c, 5).value();
  model::testing::RandomizeWeights(&trainer_weights, 11);
  model::Transformer rollout = trainer_weights.Clone().value();
  {
    c10::NoGradGuard no_grad;
    at::manual_seed(12);
    for (auto& [name, p] : rollout.NamedParameters()) {
      // Small, as rounding makes it: it flips a few routes (4 of 192), each of which moves the
      // log-probabilities after it more than the routers' slightly other weights do.
      if (name.find("mlp.gate.weight") != std::string::npos) p.add_(at::randn(p.sizes()) * 0.003);
    }
  }
  std::vector<Group> batch = Batch(5);
  int64_t entries = 0;
  for (Group& g : batch) {
    for (Sample& s : g.samples) {
      TokenBatch tb = MakeTokenBatch({&s}, 0);
      at::Tensor routes;
      const at::Tensor lp = TokenLogprobs(rollout, tb.tokens, tb.mask, 1.0, {}, &routes).value();
      const int64_t p = static_cast<int64_t>(s.prompt_ids.size()), n = tb.tokens.size(1) - 1;
      for (size_t j = 0; j < s.response_ids.size(); ++j) s.logprobs[j] = lp[0][p + j - 1].item<float>();
      const at::Tensor fed = routes[0].narrow(0, 0, n).to(at::kInt).contiguous();  // the last token feeds nothing
      s.routes.assign(fed.data_ptr<int32_t>(), fed.data_ptr<int32_t>() + fed.numel());
      entries += n * c.SparseLayerCount();
    }
  }
  auto step = [&](const model::Transformer& weights, bool replay) {
    GrpoOptions o;
    o.routing_replay = replay;
    auto t = GrpoTrainer::Create(weights.Clone().value(), std::nullopt, o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    (*t)->BeginStep();
    EXPECT_TRUE((*t)->Accumulate(batch).ok());
    return (*t)->FinishStep().value();
  };
  const StepStats replayed = step(trainer_weights, true), free = step(trainer_weights, false);
  std::cerr << "gap replayed " << replayed.logprob_gap << " free " << free.logprob_gap << "; agreement "
            << replayed.route_agreement << " of " << replayed.routes_replayed << "\n";
  EXPECT_EQ(replayed.routes_replayed, entries);
  EXPECT_EQ(free.routes_replayed, 0);
  EXPECT_GT(replayed.route_agreement, 0.5);
  EXPECT_LT(replayed.route_agreement, 1.0) << "the perturbation flipped no route: the test shows nothing";
  EXPECT_LT(replayed.logprob_gap, 0.5 * free.logprob_gap);
  const StepStats same = step(rollout, true);
  EXPECT_LT(same.logprob_gap, 1e-5);
  EXPECT_DOUBLE_EQ(same.route_agreement, 1.0);

  // A KL term: at the first update policy and reference are one network, so the term is 0 when
  // both replay the rollout's experts (the reference replays with the policy), and would not be
  // if the reference routed on its own where the routers disagree.
  auto kl_step = [&](bool replay) {
    GrpoOptions o;
    o.routing_replay = replay;
    o.kl_coef = 0.1;
    auto t = GrpoTrainer::Create(trainer_weights.Clone().value(), trainer_weights.Clone().value(), o);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    (*t)->BeginStep();
    EXPECT_TRUE((*t)->Accumulate(batch).ok());
    return (*t)->FinishStep().value();
  };
  EXPECT_LT(kl_step(true).kl, 1e-9);
  EXPECT_LT(kl_step(false).kl, 1e-9);

  // PPO with a critic. The critic's value loss depends on its values and the returns (rewards
  // and the critic's own values), not on the policy: it changes with the rows' routes only if the
  // critic replays them. A copy of the policy does (CriticRoutes); a critic of other experts
  // cannot, and routes on its own.
  auto ppo = [&](const model::Transformer& critic_of, const std::vector<Group>& rows) {
    GrpoOptions o;
    o.routing_replay = true;
    o.advantage = Advantage::kGae;
    auto critic = ValueModel::FromPolicy(critic_of);
    EXPECT_TRUE(critic.ok());
    model::NamedTensors weights = critic->NamedParameters();  // its head starts at 0: values then
    at::manual_seed(4);                                         // would not depend on the backbone
    for (auto& [name, w] : weights) {
      if (name == kValueHeadName) w = at::randn(w.sizes());
    }
    EXPECT_TRUE(critic->LoadNamedParameters(weights).ok());
    auto t = GrpoTrainer::Create(trainer_weights.Clone().value(), std::nullopt, o, std::move(*critic));
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    (*t)->BeginStep();
    EXPECT_TRUE((*t)->Accumulate(rows).ok());
    auto stats = (*t)->FinishStep();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return stats.value();
  };
  std::vector<Group> shifted = batch;  // every expert e replaced by e + 1 (mod E): still k distinct
  for (Group& g : shifted) {
    for (Sample& s : g.samples) {
      for (int32_t& e : s.routes) e = static_cast<int32_t>((e + 1) % c.moe.num_experts);
    }
  }
  const StepStats own = ppo(trainer_weights, batch), moved = ppo(trainer_weights, shifted);
  EXPECT_EQ(own.routes_replayed, entries);
  EXPECT_GT(own.value_loss, 0.0);
  EXPECT_GT(std::abs(own.value_loss - moved.value_loss), 1e-6 * own.value_loss) << "the critic ignored the routes";
  model::ModelConfig more = c;
  more.moe.num_experts = 8;
  const model::Transformer other = model::Transformer::Create(more, 3).value();
  EXPECT_DOUBLE_EQ(ppo(other, batch).value_loss, ppo(other, shifted).value_loss)
      << "a critic of other experts must route on its own";

  GrpoOptions o;
  o.routing_replay = true;
  auto dense = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 1).value(), std::nullopt, o);
  EXPECT_EQ(dense.status().code(), Code::kInvalidArgument) << "a dense policy has nothing to replay";
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
    KlEstimator estimator = KlEstimator::kK3;
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
                                   {"gae-turns", LossNorm::kToken, 2, 1, 0, Correction::kNone, Advantage::kGae, true},
                                   {"token-k2", LossNorm::kToken, 1, 1, 0.1, Correction::kNone, Advantage::kGrpo,
                                    false, KlEstimator::kK2},
                                   {"decoupled-k2-epochs", LossNorm::kSequence, 2, 2, 0.2, Correction::kDecoupled,
                                    Advantage::kGrpo, false, KlEstimator::kK2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    GrpoOptions o;
    o.schedule.lr = 3e-2;  // large, so that later updates move the ratio past the clip range
    o.norm = c.norm;
    o.norm_constant = 8;
    o.minibatches = c.minibatches;
    o.epochs = c.epochs;
    o.kl_coef = c.kl;
    o.kl_estimator = c.estimator;
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


// --freeze model.embed_tokens: the (tied) embedding gets no gradient and stays as it was, bit
// for bit, while the body trains; a prefix that names no parameter is refused.
TEST(GrpoTrainerTest, FrozenParametersStayAsTheyWere) {
  at::set_num_threads(1);
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  o.adamw.weight_decay = 0.01;  // weight decay would move a parameter even with a zero gradient
  o.freeze = {"model.embed_tokens"};
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 4).value(), std::nullopt, o);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const model::NamedTensors before = (*t)->policy().Clone().value().NamedParameters();
  TrainStep(t->get(), Batch(3));
  TrainStep(t->get(), Batch(4));
  const model::NamedTensors after = (*t)->policy().NamedParameters();
  ASSERT_EQ(before.size(), after.size());
  int frozen = 0, moved = 0;
  for (size_t i = 0; i < after.size(); ++i) {
    if (after[i].first.rfind("model.embed_tokens", 0) == 0) {
      ++frozen;
      EXPECT_TRUE(at::equal(before[i].second, after[i].second)) << after[i].first << " was trained";
      EXPECT_FALSE(after[i].second.grad().defined());
    } else {
      moved += !at::equal(before[i].second, after[i].second);
    }
  }
  EXPECT_EQ(frozen, 1);
  EXPECT_EQ(moved, static_cast<int>(after.size()) - 1) << "every other parameter trains";

  o.freeze = {"model.embed"};  // any prefix of a name
  EXPECT_TRUE(GrpoTrainer::Create(model::Transformer::Create(Tiny(), 4).value(), std::nullopt, o).ok());
  for (const std::string bad : {"embed_tokens", "", "model.layers.9"}) {
    o.freeze = {bad};
    auto refused = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 4).value(), std::nullopt, o);
    ASSERT_FALSE(refused.ok()) << "'" << bad << "'";
    EXPECT_EQ(refused.status().code(), Code::kInvalidArgument);
  }
}

}  // namespace
}  // namespace rl::train
