// The whole learning loop in one process: a real rl-queue server in a thread, stand-ins for
// rl-rollout and rl-reward in another, and RunGrpo; then a second RunGrpo resumes from the
// checkpoint the first one left.
#include "rl/train/grpo_loop.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "rl/dist/test_ranks.h"
#include "rl/model/generate.h"
#include "rl/model/model_file.h"
#include "rl/model/test_util.h"
#include "rl/model/tokenizer.h"
#include "rl/queue/server.h"
#include "rl/train/checkpoint.h"
#include "rl/train/feeder.h"
#include "rl/train/ref_loop.h"

namespace rl::train {
namespace {

const Value* Col(const queue::GotRow& r, const std::string& name) {
  for (const auto& [n, v] : r.columns) if (n == name) return &v;
  return nullptr;
}

class GrpoLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rl-grpo-" + std::to_string(::getpid());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/ckpt");
    queue::ServerOptions o;
    o.bind = "tcp://127.0.0.1:0";
    o.dir = dir_ + "/q";
    o.declare = {{"generate", {"prompt_ids"}},
                 {"reward", {"prompt", "response", "answer"}},
                 {"train", {"prompt_ids", "response_ids", "logprobs", "reward", "version"}}};
    server_ = std::move(queue::Server::Open(o).value());
    server_thread_ = std::thread([this] { EXPECT_TRUE(server_->Run(stop_server_).ok()); });
    model::ModelConfig c = model::testing::TinyLlama(16, 32, 1, 2, 0, 32);  // one layer
    ASSERT_TRUE(model::SaveModelFile(dir_ + "/ckpt/weights-0.safetensors", model::Transformer::Create(c, 1).value(), 0).ok());
    std::ofstream(dir_ + "/prompts.jsonl") << "{\"prompt\":\"001+002=\",\"answer\":\"3\"}\n"
                                           << "{\"prompt\":\"010+020=\",\"answer\":\"30\"}\n";
    roles_ = std::thread([this] { Roles(); });
  }
  void TearDown() override {
    stop_roles_ = true;
    roles_.join();
    stop_server_ = true;
    server_thread_.join();
    std::filesystem::remove_all(dir_);
  }
  ClientOptions Options() {
    ClientOptions o;
    o.endpoint = server_->endpoint();
    o.give_up_s = 10;
    return o;
  }
  // rl-rollout and rl-reward in miniature: sample with the newest weights, reward by exact match
  // (a random model rarely answers right, so the reward is 1 for a response starting with a digit).
  void Roles() {
    queue::QueueClient c(Options());
    model::CharTokenizer tok;
    uint64_t seed = 1;
    while (!stop_roles_) {
      queue::GetRequest g;
      g.task = "generate";
      g.count = 8;
      g.groups = true;
      g.wait_ms = 50;
      auto got = c.Get(g);
      if (got.ok() && !got->rows.empty()) {
        auto versions = ListVersions();
        auto m = model::LoadModelFile(WeightsPath(dir_ + "/ckpt", versions));
        ASSERT_TRUE(m.ok());
        std::vector<std::vector<int64_t>> prompts;
        for (const auto& r : got->rows) prompts.push_back(std::get<Tensor>(*Col(r, "prompt_ids")).ToI64());
        model::GenerateOptions o;
        o.max_new_tokens = 4;
        o.seed = seed++;
        o.sampling.temperature = rollout_temperature_;
        o.eos_id = tok.eos_id();
        auto gens = model::Generate(m->model, prompts, o).value();
        queue::PutRequest put;
        put.ack_task = "generate";
        put.ack_lease = got->lease;
        for (size_t i = 0; i < gens.size(); ++i) {
          put.rows.push_back({got->rows[i].index,
                              {{"response_ids", Tensor::FromI64(gens[i].response_ids)},
                               {"response", tok.Decode(gens[i].response_ids).value()},
                               {"logprobs", Tensor::FromF32(gens[i].logprobs)},
                               {"version", static_cast<int64_t>(m->version)}}});
        }
        ASSERT_TRUE(c.Put(put).ok());
      }
      g.task = "reward";
      g.groups = false;
      got = c.Get(g);
      if (got.ok() && !got->rows.empty()) {
        queue::PutRequest put;
        put.ack_task = "reward";
        put.ack_lease = got->lease;
        for (const auto& r : got->rows) {
          const std::string& resp = std::get<std::string>(*Col(r, "response"));
          double reward = !resp.empty() && resp[0] >= '0' && resp[0] <= '9' ? 1.0 : 0.0;
          if (uniform_rewards_) reward = 0;
          if (half_uniform_) {  // groups of the first prompt always differ, those of the second never (all 1)
            reward = std::get<std::string>(*Col(r, "prompt")) == "001+002=" ? static_cast<double>(r.index % 2) : 1.0;
          }
          put.rows.push_back({r.index, {{"reward", reward}}});
        }
        ASSERT_TRUE(c.Put(put).ok());
      }
    }
  }
  // Two steps with dynamic sampling and this --max-redraws.
  GrpoLoopOptions Redrawing(int64_t max_redraws) {
    GrpoLoopOptions o = Loop(2);
    o.dynamic_sampling = true;
    o.max_redraws = max_redraws;
    return o;
  }
  std::vector<nlohmann::json> StepEvents() {
    std::vector<nlohmann::json> out;
    std::istringstream lines(TrainEvents());
    for (std::string line; std::getline(lines, line);) {
      auto e = nlohmann::json::parse(line);
      if (e["event"] == "step") out.push_back(std::move(e));
    }
    return out;
  }
  std::string TrainEvents() {
    std::ifstream events(dir_ + "/run/events/train-0.jsonl");
    return std::string((std::istreambuf_iterator<char>(events)), std::istreambuf_iterator<char>());
  }
  uint64_t ListVersions() {
    uint64_t best = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/ckpt")) {
      std::string n = e.path().filename().string();
      // Only whole files: a weights file being written has a temporary name with a suffix.
      const std::string suffix = ".safetensors";
      if (n.rfind("weights-", 0) != 0 || n.size() <= 8 + suffix.size() ||
          n.compare(n.size() - suffix.size(), suffix.size(), suffix) != 0) {
        continue;
      }
      best = std::max<uint64_t>(best, std::stoull(n.substr(8)));
    }
    return best;
  }
  GrpoLoopOptions Loop(int64_t steps) {
    GrpoLoopOptions o;
    o.connect = server_->endpoint();
    o.timeout_s = 10;
    o.checkpoint_dir = dir_ + "/ckpt";
    o.prompts = dir_ + "/prompts.jsonl";
    o.prompt.model = model::testing::DemoDir();
    o.eval_data = dir_ + "/prompts.jsonl";  // held-out evaluations on the same two prompts
    o.verifier = "addition";
    o.eval_max_new_tokens = 4;
    o.run_dir = dir_ + "/run";
    o.group_size = 4;
    o.prompts_per_step = 2;
    o.max_steps = steps;
    o.dynamic_sampling = false;
    o.eval_size = 4;
    o.eval_every = 1;
    o.grpo.schedule.lr = 1e-3;
    return o;
  }

  std::string dir_;
  std::unique_ptr<queue::Server> server_;
  std::atomic<bool> stop_server_{false}, stop_roles_{false};
  std::atomic<bool> uniform_rewards_{false};  // every response scores 0: dynamic sampling keeps no group
  std::atomic<bool> half_uniform_{false};     // it keeps the first prompt's groups only
  std::atomic<double> rollout_temperature_{1.0};
  std::thread server_thread_, roles_;
};

TEST_F(GrpoLoopTest, TrainsPublishesVersionsAndResumesFromItsCheckpoint) {
  std::atomic<bool> stop{false};
  Status s = RunGrpo(Loop(2), stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ckpt/weights-2.safetensors"));
  EXPECT_EQ(ListCheckpoints(dir_ + "/ckpt"), (std::vector<int64_t>{1, 2}));
  // Sync mode: the rows were generated (KV cache, one token at a time) with the weights each step
  // started from, so the trainer's full forward pass gives their log-probabilities back.
  auto steps = StepEvents();
  EXPECT_EQ(steps.size(), 2u);
  for (const auto& e : steps) {
    EXPECT_LT(e["logprob_gap"].get<double>(), 1e-4) << e;
    EXPECT_EQ(e["min_version"], e["version"].get<int64_t>() - 1) << e;
  }
  EXPECT_EQ(TrainEvents().find("\"logprob-gap\""), std::string::npos);
  queue::QueueClient c(Options());
  EXPECT_EQ(c.MetaGet(kStepKey).value(), std::optional<std::string>("2"));

  GrpoLoopOptions more = Loop(3);
  more.staleness = 1;
  more.start_fraction = 0;  // async
  s = RunGrpo(more, stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(c.MetaGet(kVersionKey).value(), std::optional<std::string>("3"));
  auto ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->step, 3);
  EXPECT_EQ((*ckpt)->adam_steps, 3) << "the optimizer state came back with the checkpoint";
  EXPECT_EQ((*ckpt)->consumed.size(), 8u);
  auto stat = c.Stat().value();
  for (const auto& t : stat["tasks"]) {
    if (t["name"] == "train") {
      EXPECT_EQ(t["consumed"].get<uint64_t>(), 24u) << "3 steps of 2 groups of 4, once each";
    }
  }
}

// Two data-parallel ranks (threads, each its own RunGrpo over a Gloo group) run 3 steps of 4
// groups; `o` gives the update's options.
std::array<Status, 2> RunTwoRanks(GrpoLoopOptions o) {
  const std::string rendezvous = "127.0.0.1:" + std::to_string(dist::testing::FreePort());
  std::array<Status, 2> status;
  std::vector<std::thread> ranks;
  std::atomic<bool> stop{false};
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, o, r]() mutable {
      o.prompts_per_step = 4;
      o.world = 2;
      o.rank = r;
      o.id = std::to_string(r);
      o.rendezvous = rendezvous;
      o.group_timeout_s = 30;
      status[r] = RunGrpo(o, stop);
    });
  }
  for (auto& t : ranks) t.join();
  return status;
}

// Each rank leases its balanced part of every step, and rank 0's checkpoints list and ack every
// rank's rows, once.
TEST_F(GrpoLoopTest, TwoRanksShareEveryStepAndEachRowIsConsumedOnce) {
  std::array<Status, 2> status = RunTwoRanks(Loop(3));
  ASSERT_TRUE(status[0].ok()) << status[0].ToString();
  ASSERT_TRUE(status[1].ok()) << status[1].ToString();
  auto ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->step, 3);
  EXPECT_EQ((*ckpt)->consumed.size(), 16u) << "4 groups of 4, from both ranks";
  // Both ranks trained: rank 1's step events name the groups it took.
  size_t rank1_groups = 0;
  std::ifstream events(dir_ + "/run/events/train-1.jsonl");
  for (std::string line; std::getline(events, line);) {
    auto e = nlohmann::json::parse(line);
    if (e["event"] != "step") continue;
    rank1_groups += e["trained_groups"].size();
    EXPECT_EQ(e["samples"], 16) << "the step's samples over both ranks";
  }
  EXPECT_GT(rank1_groups, 0u);
  EXPECT_LT(rank1_groups, 12u);
  for (const auto& e : StepEvents()) EXPECT_LT(e["logprob_gap"].get<double>(), 1e-4) << e;
  queue::QueueClient c(Options());
  for (const auto& t : c.Stat().value()["tasks"]) {
    if (t["name"] == "train") {
      EXPECT_EQ(t["consumed"].get<uint64_t>(), 48u) << "3 steps of 4 groups of 4, once each";
      EXPECT_EQ(t["leased"].get<uint64_t>(), 0u);
    }
  }
}

// PPO with a critic over 2 minibatches x 2 epochs on two ranks: every step takes 4 updates on
// both, and rank 0's checkpoint holds the critic and its optimizer, which took them too.
TEST_F(GrpoLoopTest, TwoRanksTrainPpoWithACriticOverMinibatches) {
  GrpoLoopOptions o = Loop(3);
  o.grpo.advantage = Advantage::kGae;
  o.grpo.minibatches = 2;
  o.grpo.epochs = 2;
  std::array<Status, 2> status = RunTwoRanks(o);
  ASSERT_TRUE(status[0].ok()) << status[0].ToString();
  ASSERT_TRUE(status[1].ok()) << status[1].ToString();
  auto ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->step, 3);
  EXPECT_EQ((*ckpt)->adam_steps, 12) << "3 steps of 2 minibatches x 2 epochs";
  EXPECT_EQ((*ckpt)->critic_adam_steps, 12);
  EXPECT_FALSE((*ckpt)->critic.empty());
  std::ifstream events(dir_ + "/run/events/train-1.jsonl");
  int steps = 0;
  for (std::string line; std::getline(events, line);) {
    auto e = nlohmann::json::parse(line);
    if (e["event"] != "step") continue;
    ++steps;
    EXPECT_EQ(e["updates"], 4) << e;
    EXPECT_EQ(e["samples"], 16) << e;
    EXPECT_TRUE(e.contains("value_loss")) << e;
  }
  EXPECT_EQ(steps, 3);
}

// With every group's rewards equal, dynamic sampling would redraw forever: past --max-redraws the
// trainer stops and says why, releasing nothing it did not train on.
TEST_F(GrpoLoopTest, DynamicSamplingStopsWithADiagnosisPastMaxRedraws) {
  uniform_rewards_ = true;
  std::atomic<bool> stop{false};
  Status s = RunGrpo(Redrawing(3), stop);
  EXPECT_EQ(s.code(), Code::kDataError) << s.ToString();
  EXPECT_NE(s.message().find("every group's rewards were equal"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ckpt/weights-1.safetensors")) << "no step was trained";
  EXPECT_NE(TrainEvents().find("\"redraw-limit\""), std::string::npos);
}

// Asynchronous (k = 1) with decoupled PPO over two minibatches: the step events report the
// importance weights of the behaviour/proximal mismatch.
TEST_F(GrpoLoopTest, AsyncTrainingWithDecoupledPpoReportsItsImportanceWeights) {
  std::atomic<bool> stop{false};
  GrpoLoopOptions o = Loop(3);
  o.staleness = 1;
  o.start_fraction = 0;
  o.grpo.minibatches = 2;
  o.grpo.off = {Correction::kDecoupled, 2.0};
  Status s = RunGrpo(o, stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto steps = StepEvents();
  EXPECT_EQ(steps.size(), 3u);
  for (const auto& e : steps) {
    EXPECT_GT(e["is_weight_mean"].get<double>(), 0.5) << e;
    EXPECT_GE(e["is_weight_max"].get<double>(), e["is_weight_mean"].get<double>()) << e;
    EXPECT_EQ(e["updates"], 2) << e;
  }
}

// PPO with a critic, one response per prompt (so every group is "uniform": dynamic sampling must
// stand aside): the checkpoint holds the critic and its optimizer, and a resumed trainer goes on
// with them rather than a fresh critic.
TEST_F(GrpoLoopTest, PpoWithACriticCheckpointsTheCriticAndResumesIt) {
  std::atomic<bool> stop{false};
  GrpoLoopOptions o = Loop(2);
  o.grpo.advantage = Advantage::kGae;
  o.grpo.minibatches = 2;
  o.grpo.critic_lr = 1e-2;
  o.group_size = 1;
  o.prompts_per_step = 4;
  o.dynamic_sampling = true;
  Status s = RunGrpo(o, stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_FALSE((*ckpt)->critic.empty());
  EXPECT_EQ((*ckpt)->critic_adam_steps, 4) << "2 steps of 2 minibatches";
  at::Tensor head;
  for (const auto& [name, t] : (*ckpt)->critic) {
    if (name == kValueHeadName) head = t;
  }
  ASSERT_TRUE(head.defined());
  EXPECT_GT(head.abs().max().item<float>(), 0.0f) << "the critic's head has learned from zero";
  for (const auto& e : StepEvents()) EXPECT_GT(e["value_loss"].get<double>(), 0.0) << e;

  o.max_steps = 3;
  s = RunGrpo(o, stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->step, 3);
  EXPECT_EQ((*ckpt)->critic_adam_steps, 6) << "the critic's optimizer came back with the checkpoint";
}

// A critic smaller than the policy (--critic-config): its own backbone, checkpointed with its own
// shapes and resumed from them; a resumed run given another critic is refused, not retrained.
TEST_F(GrpoLoopTest, ASmallerCriticOfItsOwnConfigIsCheckpointedAndAnotherOneRefusedOnResume) {
  std::atomic<bool> stop{false};
  GrpoLoopOptions o = Loop(2);
  o.grpo.advantage = Advantage::kGae;
  o.grpo.critic_lr = 1e-2;
  o.group_size = 1;
  o.prompts_per_step = 4;
  model::ModelConfig small = model::testing::TinyLlama(8, 16, 1, 2, 0, 32);  // the policy: 16 wide
  o.critic_config = model::ConfigToString(small);
  Status s = RunGrpo(o, stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  at::Tensor head;
  for (const auto& [name, t] : (*ckpt)->critic) {
    if (name == kValueHeadName) head = t;
  }
  ASSERT_TRUE(head.defined());
  EXPECT_EQ(head.size(1), 8) << "the critic's own hidden size, not the policy's 16";
  EXPECT_GT(head.abs().max().item<float>(), 0.0f);
  for (const auto& e : StepEvents()) EXPECT_GT(e["value_loss"].get<double>(), 0.0) << e;

  o.max_steps = 3;
  s = RunGrpo(o, stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(LoadNewestCheckpoint(dir_ + "/ckpt").value()->critic_adam_steps, 3);

  o.max_steps = 4;
  o.critic_config.clear();  // a copy of the policy: not the critic the checkpoint holds
  s = RunGrpo(o, stop);
  EXPECT_EQ(s.code(), Code::kConfig) << s.ToString();
  EXPECT_NE(s.message().find("step 3's critic does not fit a copy of the policy"), std::string::npos) << s.message();
  small.vocab_size = 4;
  o.critic_config = model::ConfigToString(small);
  s = RunGrpo(o, stop);
  EXPECT_EQ(s.code(), Code::kConfig) << s.ToString();
  EXPECT_NE(s.message().find("--critic-config: vocab_size 4 is below"), std::string::npos) << s.message();
}

TEST_F(GrpoLoopTest, ARolloutAtAnotherTemperatureIsReported) {
  rollout_temperature_ = 0.5;
  std::atomic<bool> stop{false};
  Status s = RunGrpo(Loop(1), stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_NE(TrainEvents().find("\"logprob-gap\""), std::string::npos);
}

TEST_F(GrpoLoopTest, PastMaxRedrawsAStepTrainsOnTheGroupsItKept) {
  half_uniform_ = true;
  std::atomic<bool> stop{false};
  Status s = RunGrpo(Redrawing(1), stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ckpt/weights-2.safetensors"));
  EXPECT_NE(TrainEvents().find("\"redraw-limit\""), std::string::npos);
  // The dropped groups (all 1) are in the population's mean reward, not in the trained groups'.
  for (const auto& e : StepEvents()) {
    const double rows = e["samples"].get<double>(), dropped = e["uniform_rows"].get<double>();
    EXPECT_GT(dropped, 0) << e;
    const double population = e["population_reward"].get<double>();
    EXPECT_NEAR(population * (rows + dropped), e["reward"].get<double>() * rows + dropped, 1e-9) << e;
  }
}

// A trainer serving weights over UCX records each version in train.served before it can be
// pulled. One killed after serving versions it never checkpointed (here: served says 4, the
// newest checkpoint is step 2) must not give other weights those numbers on its restart.
TEST_F(GrpoLoopTest, AResumedTrainerNumbersOnPastVersionsItServedButNeverCheckpointed) {
  std::atomic<bool> stop{false};
  GrpoLoopOptions first = Loop(2);
  first.publish.bind = "tcp://127.0.0.1:0";
  Status s = RunGrpo(first, stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  queue::QueueClient c(Options());
  EXPECT_EQ(c.MetaGet(kServedKey).value(), std::optional<std::string>("2"));

  ASSERT_TRUE(c.MetaSet({kServedKey, "4", std::nullopt}).ok());
  s = RunGrpo(Loop(3), stop);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/ckpt/weights-5.safetensors")) << "the resumed weights, renumbered";
  auto ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->step, 3);
  EXPECT_EQ((*ckpt)->version, 6u) << "step 3 trained on from version 5";
  EXPECT_EQ(c.MetaGet(kVersionKey).value(), std::optional<std::string>("6"));
  std::ifstream events(dir_ + "/run/events/train-0.jsonl");
  std::string all((std::istreambuf_iterator<char>(events)), std::istreambuf_iterator<char>());
  EXPECT_NE(all.find("\"event\":\"version-skip\""), std::string::npos);
}

}  // namespace
}  // namespace rl::train

namespace rl::train {
namespace {

// --ref-from-queue: refused against a train task without ref_logprobs; with none declared the
// trainer declares it with the column, and trains on rows the reference role (RunRefLoop, in a
// thread) scored: every trained row went through task ref, and the KL term is live.
TEST_F(GrpoLoopTest, WithTheReferenceAsARoleEveryTrainedRowWasScoredByIt) {
  std::atomic<bool> stop{false};
  GrpoLoopOptions o = Loop(3);
  o.grpo.kl_coef = 0.5;
  o.grpo.ref_from_rows = true;
  Status s = RunGrpo(o, stop);
  EXPECT_EQ(s.code(), Code::kConfig) << s.ToString();
  queue::QueueClient c(Options());
  ASSERT_TRUE(c.Retire("train").ok());
  model::Transformer ref = model::LoadModelFile(dir_ + "/ckpt/weights-0.safetensors").value().model;
  std::atomic<bool> stop_ref{false};
  RefStats ref_stats;
  std::thread role([&] {
    RefLoopOptions r;
    r.client = Options();
    r.holder = "ref/0";
    r.wait_ms = 100;
    r.progress_ms = 0;
    EXPECT_TRUE(RunRefLoop(r, ref, stop_ref, &ref_stats).ok());
  });
  s = RunGrpo(o, stop);
  stop_ref = true;
  role.join();
  ASSERT_TRUE(s.ok()) << s.ToString();
  auto steps = StepEvents();
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_GT(steps.back()["kl"].get<double>(), 0) << steps.back();
  auto ckpt = LoadNewestCheckpoint(dir_ + "/ckpt");
  ASSERT_TRUE(ckpt.ok() && ckpt->has_value());
  EXPECT_EQ((*ckpt)->step, 3);
  EXPECT_GE(ref_stats.rows, 24u);  // 3 steps of 2 groups of 4, and what was fed ahead
  EXPECT_EQ(ref_stats.lost + ref_stats.failed, 0u);
  auto stat = c.Stat().value();
  for (const auto& t : stat["tasks"]) {
    if (t["name"] == "train") {
      EXPECT_EQ(t["columns"].back(), "ref_logprobs") << t;
    }
  }
}

}  // namespace
}  // namespace rl::train
