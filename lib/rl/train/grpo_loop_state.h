// The GRPO loop's state (grpo_loop.h), shared by grpo_loop.cc (one trainer, and what every rank
// does) and grpo_loop_ranks.cc (what data-parallel ranks do besides). Internal to rl-train.
// Thread safety: as RunGrpo's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "rl/core/event_log.h"
#include "rl/dist/group.h"
#include "rl/model/prompt_encoder.h"
#include "rl/queue/client.h"
#include "rl/reward/verifier.h"
#include "rl/train/checkpoint.h"
#include "rl/train/evaluate.h"
#include "rl/train/feeder.h"
#include "rl/train/grpo_loop.h"
#include "rl/train/sample.h"
#include "rl/train/weight_publisher.h"

namespace rl::train::loop {

constexpr char kTrainTask[] = "train";
constexpr int64_t kGetWaitMs = 200;  // longest a get waits for rows before the feeder runs again

inline double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

inline std::string Duration(double s) {
  char buf[32];
  int64_t t = static_cast<int64_t>(s);
  std::snprintf(buf, sizeof buf, "%lldm%02llds", static_cast<long long>(t / 60), static_cast<long long>(t % 60));
  return buf;
}

inline ClientOptions ClientFor(const GrpoLoopOptions& o, const std::string& sender) {
  ClientOptions c;
  c.endpoint = o.connect;
  c.give_up_s = o.timeout_s;
  c.sender = sender.empty() ? NewSenderId("rl-train") : sender;
  return c;
}

class GrpoLoop {
 public:
  GrpoLoop(const GrpoLoopOptions& o, const std::atomic<bool>& stop)
      : o_(o), stop_(stop), client_(ClientFor(o, "")) {}
  Status Run();

 private:
  Status Start();
  // --sft-data read and encoded into o_.grpo.sft_examples (the SFT mix, GrpoOptions::sft_coef).
  Status LoadSftMix();
  Status JoinGroup();
  Status AgreeOnFlags();
  Status AgreeOnStart(const std::optional<Checkpoint>& ckpt);
  Result<bool> AnyRankStopped();
  Status CollectRanks(std::vector<uint64_t>* consumed, int64_t* samples);
  Status GiveBack(const std::vector<Group>& groups, const char* why);
  void ResetStep();
  Status Feed(int64_t min_version);
  queue::GetRequest TrainGet(int64_t count, int64_t min_version) const;
  // The groups of a get's rows (SortRows): rows left out are reported, acked and never trained
  // on; rows kept without their malformed routes are reported.
  Result<std::vector<Group>> TakeGroups(const queue::GetReply& reply);
  Status TrainIfEnough(std::vector<Group>* pending, bool last);
  void TrainPending(std::vector<Group>* pending);
  bool lead() const { return o_.rank == 0; }
  std::string Holder() const { return "train/" + o_.id; }
  Status StartFrom(Checkpoint c);
  Status StartFresh();
  // The critic of --advantage gae, fresh: over a copy of `policy`, or a backbone of its own from
  // --critic-config. nullopt for the other estimators.
  Result<std::optional<ValueModel>> NewCritic(const model::Transformer& policy) const;
  Status SkipServedVersions();
  Status CheckTrainTask();
  Status CollectAndTrain(std::vector<uint64_t>* consumed, int64_t* samples);
  Status TrainOrDrop(const queue::GetReply& reply, std::vector<Group>* pending, std::vector<uint64_t>* consumed);
  Status RedrawLimit(int64_t dropped_groups, int64_t kept_rows, const std::vector<uint64_t>& consumed);
  Status AfterStep(const StepStats& s, std::vector<uint64_t> consumed, double seconds);
  void Evaluate(StepStats* s, nlohmann::json* fields);
  void Phase(const char* phase);
  Result<double> HeldOutAccuracy() {
    return GreedyAccuracy(trainer_->policy(), *encoder_, *held_out_, verifier_.get(), o_.eval_max_new_tokens);
  }
  void OnWritten(const Checkpoint& c, const Status& s);
  // What a row's routes are checked against (sample.h): the policy's sparse layers with
  // --routing-replay, nothing otherwise. Warns once when trained rows come without routes.
  RouteLimits Routes() const { return RouteLimitsOf(trainer_->policy().config(), o_.grpo.routing_replay); }
  // What a row's tokens are checked against: what every model of the step takes (a critic of its
  // own config may have a shorter context).
  TokenLimits Tokens() const {
    TokenLimits t = TokenLimitsOf(trainer_->policy().config());
    if (const ValueModel* critic = trainer_->critic()) {
      const TokenLimits c = TokenLimitsOf(critic->config());
      t = {std::min(t.vocab_size, c.vocab_size), std::min(t.context, c.context)};
    }
    return t;
  }
  // `malformed`: rows whose routes were left out as malformed (reported as such, not here). Also
  // warns once when a row's routes stop short of its trained tokens (RoutesCoverTrainedTokens).
  void WarnIfUnrouted(const std::vector<Group>& groups, const std::vector<uint64_t>& malformed) {
    for (const Group& g : groups) {
      for (const Sample& s : g.samples) {
        if (ref_routing_warned_) break;
        if (const std::string why = RefRoutingMismatch(s, o_.grpo.routing_replay); !why.empty()) {
          spdlog::warn("--ref-from-queue: {}: the KL term compares networks that route differently; run both with "
                       "--routing-replay or neither (warned once)", why);
          ref_routing_warned_ = true;
        }
      }
    }
    if (!o_.grpo.routing_replay) return;
    const RouteLimits limits = Routes();
    for (const Group& g : groups) {
      for (const Sample& s : g.samples) {
        if (!short_routes_warned_ && !RoutesCoverTrainedTokens(s, limits)) {
          spdlog::warn("--routing-replay: row {} has routes for {} of its {} tokens, fewer than its trained tokens "
                       "are predicted from; those route freely (warned once)", s.index,
                       s.routes.size() / static_cast<size_t>(limits.sparse_layers * limits.per_token),
                       s.prompt_ids.size() + s.response_ids.size());
          short_routes_warned_ = true;
        }
        if (unrouted_warned_ || !s.routes.empty() ||
            std::find(malformed.begin(), malformed.end(), s.index) != malformed.end()) {
          continue;
        }
        spdlog::warn("--routing-replay: row {} has no routes (rl-rollout --record-routes writes them); its tokens "
                     "route freely (warned once)", s.index);
        unrouted_warned_ = true;
      }
    }
  }
  bool unrouted_warned_ = false, short_routes_warned_ = false, ref_routing_warned_ = false;

  GrpoLoopOptions o_;
  const std::atomic<bool>& stop_;
  queue::QueueClient client_;
  EventLog events_;
  std::unique_ptr<Feeder> feeder_;
  std::unique_ptr<GrpoTrainer> trainer_;
  std::unique_ptr<queue::QueueClient> writer_client_;  // used on the writer thread only
  std::unique_ptr<CheckpointWriter> writer_;           // declared after what its thread uses
  std::unique_ptr<queue::QueueClient> served_client_;  // used on the publisher's thread only
  std::unique_ptr<WeightPublisher> publisher_;         // null without --weights-bind
  std::string phase_;
  std::vector<std::string> step_groups_;  // the groups this step trained on, for the step event
  double train_s_ = 0;                    // this step's seconds in forward, backward and update
  TokenAge token_age_;                    // this step's trained tokens, and those of older versions
  // Rows of uniform-reward groups dynamic sampling dropped this step and their reward sum (the
  // queue's get replies say): with the trained rows, the mean reward of all the step was sent.
  uint64_t uniform_rows_ = 0;
  double uniform_sum_ = 0;
  std::shared_ptr<const model::PromptEncoder> encoder_;
  std::optional<EvalSet> held_out_;                // none without --eval-data
  std::unique_ptr<reward::Verifier> verifier_;
  std::mt19937_64 rng_;
  int64_t step_ = 0;
  uint64_t version_ = 0;
  double best_accuracy_ = 0, last_accuracy_ = -1, reward_ema_ = -1, best_reward_ema_ = 0;
  int64_t start_step_ = 0;
  int64_t accuracy_step_ = -1;  // the step last_accuracy_ was measured at
  bool warned_gap_ = false;     // the logprob-gap warning is given once per process
  std::chrono::steady_clock::time_point started_;
  std::optional<dist::Group> group_;  // data-parallel ranks (world > 1)
  bool group_stopped_ = false;        // a rank was asked to stop: every rank stops after the round
  Status train_status_;               // of the last TrainPending
};

}  // namespace rl::train::loop
