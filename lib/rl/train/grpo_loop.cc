#include "rl/train/grpo_loop.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <chrono>
#include <cmath>
#include <random>
#include <sstream>

#include "rl/core/event_log.h"
#include "rl/core/fs.h"
#include "rl/core/json_field.h"
#include "rl/dist/group.h"
#include "rl/health/progress.h"
#include "rl/model/device.h"
#include "rl/model/hf_dir.h"
#include "rl/model/model_file.h"
#include "rl/train/checkpoint.h"
#include "rl/train/data_parallel.h"
#include "rl/train/evaluate.h"
#include "rl/train/feeder.h"
#include "rl/train/grpo_loop_state.h"
#include "rl/train/ref_loop.h"
#include "rl/train/sft.h"
#include "rl/train/weight_publisher.h"

namespace rl::train {
namespace loop {

Status GrpoLoop::LoadSftMix() {
  // As rl-train sft reads its --data: a --response-key, or the last assistant message of messages.
  auto data = task::Dataset::Open(o_.sft_data, SftRecordOptions(o_.prompt.dataset, o_.sft_response_key,
                                                                 o_.sft_response_key_given));
  if (!data.ok()) return data.status().WithContext("--sft-data");
  const int64_t context = encoder_->dir().config.context();
  RL_ASSIGN_OR_RETURN(SftData sft, EncodeSftData(data->get(), *encoder_, context));
  if (sft.samples.empty()) return Status::DataError("--sft-data " + o_.sft_data + ": no example fits the context");
  if (sft.too_long > 0) {
    spdlog::warn("--sft-data: {} of {} examples are longer than the context of {} tokens: left out", sft.too_long,
                 (*data)->size(), context);
  }
  spdlog::info("SFT mix: {} examples of {}, {} in each update at weight {}", sft.samples.size(), o_.sft_data,
               o_.grpo.sft_batch, o_.grpo.sft_coef);
  o_.grpo.sft_examples = std::make_shared<const std::vector<Sample>>(std::move(sft.samples));
  return Status::OK();
}

Status GrpoLoop::Start() {
  if (o_.checkpoint_dir.empty()) return Status::InvalidArgument("grpo needs --checkpoint-dir");
  if (o_.dynamic_sampling && !GroupRelative(o_.grpo.advantage)) {
    // A group of equal rewards still teaches these estimators (the batch baseline or the critic),
    // and with one response per prompt every group is one.
    spdlog::info("advantage {}: dynamic sampling off (it is for group-relative estimators)",
                 AdvantageName(o_.grpo.advantage));
    o_.dynamic_sampling = false;
  }
  RL_RETURN_IF_ERROR(MakeDirs(o_.checkpoint_dir));
  if (!o_.run_dir.empty()) RL_RETURN_IF_ERROR(events_.Open(o_.run_dir, "train", o_.id));
  RL_ASSIGN_OR_RETURN(model::PromptEncoder encoder, model::OpenPromptEncoder(o_.prompt));
  encoder_ = std::make_shared<const model::PromptEncoder>(std::move(encoder));
  o_.grpo.pad_id = encoder_->dir().pad_id;
  if (o_.grpo.sft_coef > 0) RL_RETURN_IF_ERROR(LoadSftMix());
  if (o_.world > 1) {  // after the SFT mix is encoded: the ranks compare its examples too
    RL_RETURN_IF_ERROR(JoinGroup());
    RL_RETURN_IF_ERROR(AgreeOnFlags());
  }
  if (lead()) {  // the other ranks of a group neither feed, evaluate nor publish
    RL_ASSIGN_OR_RETURN(std::unique_ptr<PromptSource> source,
                        PromptSource::Open(o_.prompts, o_.prompt.dataset, encoder_));
    feeder_ = std::make_unique<Feeder>(ClientFor(o_, "rl-train-feeder:" + o_.id), std::move(source), o_.group_size);
  } else {
    o_.eval_data.clear();
    o_.publish.bind.clear();
  }
  if (!o_.eval_data.empty()) {
    RL_ASSIGN_OR_RETURN(verifier_, reward::MakeVerifier(o_.verifier, 1e-6));
    RL_ASSIGN_OR_RETURN(held_out_, LoadEvalSet(o_.eval_data, o_.prompt.dataset, *encoder_, static_cast<size_t>(o_.eval_size)));
  }
  rng_.seed(o_.seed);
  RL_ASSIGN_OR_RETURN(std::optional<Checkpoint> ckpt, LoadNewestCheckpoint(o_.checkpoint_dir));
  // Bound before the model loads, so pullers see a source that is coming (not a dead one).
  if (!o_.publish.bind.empty()) {
    served_client_ = std::make_unique<queue::QueueClient>(ClientFor(o_, ""));
    WeightPublisherOptions po = o_.publish;
    po.before_serve = [c = served_client_.get()](uint64_t v) {
      return c->MetaSet({kServedKey, std::to_string(v), std::nullopt});
    };
    RL_ASSIGN_OR_RETURN(publisher_, WeightPublisher::Start(po, &events_));
  }
  if (o_.grpo.ref_from_rows && lead()) RL_RETURN_IF_ERROR(CheckTrainTask());
  if (group_) RL_RETURN_IF_ERROR(AgreeOnStart(ckpt));
  RL_RETURN_IF_ERROR(ckpt ? StartFrom(std::move(*ckpt)) : StartFresh());
  // Rows a dead trainer had leased and not trained on (its checkpoint's rows are acked by now).
  RL_RETURN_IF_ERROR(queue::ReleaseEarlierLeases(client_, kTrainTask, Holder(), &events_));
  if (lead()) RL_RETURN_IF_ERROR(SkipServedVersions());
  if (group_) {
    RL_RETURN_IF_ERROR(trainer_->SetGroup(&*group_));
    // Every rank takes rank 0's version (SkipServedVersions may have moved it) and its weights.
    at::Tensor v = at::full({1}, static_cast<int64_t>(version_), at::kLong);
    RL_RETURN_IF_ERROR(group_->Broadcast(v, 0));
    version_ = static_cast<uint64_t>(v.item<int64_t>());
    // The float32 weights the optimizers update (the masters of a bf16 policy; gae's critic), where
    // they lie (the group takes a GPU's through NCCL or host memory); in place where contiguous.
    for (AdamW* optimizer : {&trainer_->optimizer(), trainer_->critic_optimizer()}) {
      if (!optimizer) continue;
      for (auto& [name, p] : optimizer->Weights()) {
        at::Tensor t = p.detach().to(at::kFloat).contiguous();
        RL_RETURN_IF_ERROR(group_->Broadcast(t, 0));
        if (t.data_ptr() != p.data_ptr()) p.detach().copy_(t);
      }
      optimizer->PushWeights();
    }
  }
  if (publisher_) {
    RL_ASSIGN_OR_RETURN(model::Transformer first, trainer_->policy().Clone(c10::Device(c10::kCPU)));
    publisher_->Offer(version_, std::move(first));
  }
  if (lead()) {
    writer_client_ = std::make_unique<queue::QueueClient>(ClientFor(o_, ""));
    writer_ = std::make_unique<CheckpointWriter>(o_.checkpoint_dir, o_.keep,
                                                 [this](const Checkpoint& c, const Status& s) { OnWritten(c, s); });
    RL_RETURN_IF_ERROR(client_.MetaSet({kStepKey, std::to_string(step_), std::nullopt}));
    RL_RETURN_IF_ERROR(client_.MetaSet({kVersionKey, std::to_string(version_), std::nullopt}));
  }
  // A resumed trainer takes the accuracy its checkpoint holds (measured at accuracy_step_, on a
  // held-out set of the same size): evaluating again would hold up the restart (about 0.1 s of
  // the ~0.3 s a spare trainer needs to resume). It says which step measured it.
  if (last_accuracy_ < 0 && held_out_) {
    RL_ASSIGN_OR_RETURN(last_accuracy_, HeldOutAccuracy());
    accuracy_step_ = step_;
  }
  best_accuracy_ = std::max(best_accuracy_, last_accuracy_);
  if (lead()) {  // the other ranks of a group do not evaluate
    spdlog::info("step {} version {}: held-out greedy accuracy {:.3f} (measured at step {})", step_, version_,
                 last_accuracy_, accuracy_step_);
  }
  events_.SetStep(step_);
  events_.Emit("start", {{"version", version_}, {"accuracy", last_accuracy_}, {"accuracy_step", accuracy_step_},
                         {"staleness", o_.staleness},
                         {"start_fraction", o_.start_fraction}, {"lr", o_.grpo.schedule.lr},
                         {"prompts_per_step", o_.prompts_per_step}, {"group_size", o_.group_size},
                         {"micro_batch", o_.grpo.micro_batch}, {"dynamic_sampling", o_.dynamic_sampling}});
  return Status::OK();
}

// --ref-from-queue: the reference role (`rl-train score`, ref_loop.h) writes ref_logprobs into
// the rows of its task, and task train must wait for that column. A row then stays alive until
// train consumed it, which it cannot before the row has ref_logprobs, so the reference's task sees
// every row whenever it is declared (by rl-queue serve --declare or by the role's first get): no
// order of starting matters. A train task declared without ref_logprobs would hand out rows
// before they are scored: refused (Config). No train task yet: declared here with the column.
Status GrpoLoop::CheckTrainTask() {
  RL_ASSIGN_OR_RETURN(nlohmann::json stat, client_.Stat());
  const std::vector<std::string> want = {"prompt_ids", "response_ids", "logprobs", "reward", "version", kRefColumn};
  for (const auto& t : ArrayField(stat, "tasks")) {
    if (TextField(t, "name") != kTrainTask) continue;
    const nlohmann::json& cols = ArrayField(t, "columns");
    if (std::find(cols.begin(), cols.end(), kRefColumn) != cols.end()) return Status::OK();
    std::string list;
    for (const auto& c : want) list += (list.empty() ? "" : ",") + c;
    return Status::Config(std::string("--ref-from-queue: the queue's task train does not need column ") + kRefColumn +
                          ", so it would hand out rows before the reference role scored them; declare it as train=" +
                          list + " (rl-queue serve --declare)");
  }
  return client_.Declare(kTrainTask, want);
}

// A version served over UCX and lost with the trainer before its checkpoint was written may be
// in rollouts and relays, and rows generated with it in the queue. The resumed weights go out
// under a new number after it: pullers holding the lost version take them (they are newer), and
// an on-policy bound (version >= current) regenerates the rows the lost version made.
Status GrpoLoop::SkipServedVersions() {
  RL_ASSIGN_OR_RETURN(std::optional<std::string> text, client_.MetaGet(kServedKey));
  uint64_t served = 0;
  if (!text) return Status::OK();
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), served);
  if (ec != std::errc() || end != text->data() + text->size()) {
    return Status::DataError(std::string("meta ") + kServedKey + " is not a number: '" + *text + "'");
  }
  if (served <= version_) return Status::OK();  // what was served is in the checkpoint we resume
  uint64_t next = served + 1;
  spdlog::warn("version {} was served but never checkpointed; the resumed weights (version {}) go out as version {}",
               served, version_, next);
  events_.Emit("version-skip", {{"resumed_version", version_}, {"served", served}, {"version", next}});
  version_ = next;
  return model::SaveModelFile(WeightsPath(o_.checkpoint_dir, version_), trainer_->policy(), version_);
}

void GrpoLoop::Phase(const char* phase) {
  if (phase_ == phase) return;
  phase_ = phase;
  events_.SetPhase(phase);
  events_.Emit("phase");
}

// Takes whole groups until a batch is complete; passes start once start_fraction has arrived.
Status GrpoLoop::CollectAndTrain(std::vector<uint64_t>* consumed, int64_t* samples) {
  const int64_t need = o_.prompts_per_step * o_.group_size;
  int64_t start_groups = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(o_.start_fraction * o_.prompts_per_step)));
  std::vector<Group> pending;
  int64_t got = 0, dropped_rows = 0;
  bool started = false, out_of_redraws = false;
  ResetStep();
  while (got < need) {
    if (stop_) {
      if (!consumed->empty()) (void)client_.Nack(kTrainTask, 0, *consumed);
      return Status::Timeout("stopped");
    }
    const int64_t min_version = static_cast<int64_t>(version_) - o_.staleness;
    RL_RETURN_IF_ERROR(Feed(min_version));
    // The get returns as soon as one whole group is ready, and waits briefly: the feeder runs
    // between gets, and the groups dynamic sampling drops must be replaced at once. (Asking for
    // every missing row with a long wait left sync mode idle for that wait on each refill.) The
    // start fraction is enforced below, not by the get.
    RL_ASSIGN_OR_RETURN(queue::GetReply reply, client_.Get(TrainGet(need - got, min_version)));
    dropped_rows += static_cast<int64_t>(reply.dropped);
    uniform_rows_ += reply.uniform;
    uniform_sum_ += reply.uniform_sum;
    // Rows left out as malformed (with their groups) do not count: the step still takes `need`.
    const size_t before = consumed->size();
    if (!reply.rows.empty()) RL_RETURN_IF_ERROR(TrainOrDrop(reply, &pending, consumed));
    got += static_cast<int64_t>(consumed->size() - before);
    if (dropped_rows > o_.max_redraws * o_.group_size && !out_of_redraws) {
      out_of_redraws = true;
      RL_RETURN_IF_ERROR(RedrawLimit(dropped_rows / o_.group_size, got, *consumed));
    }
    if (consumed->size() == before && !out_of_redraws) continue;
    if (!started && static_cast<int64_t>(consumed->size()) >= start_groups * o_.group_size) started = true;
    if (out_of_redraws) started = true;
    if (started) RL_RETURN_IF_ERROR(TrainIfEnough(&pending, got >= need || out_of_redraws));
    if (out_of_redraws) break;
  }
  *samples = got;
  return Status::OK();
}

// What every step starts from, one trainer or many ranks.
void GrpoLoop::ResetStep() {
  step_groups_.clear();
  train_s_ = 0;
  token_age_ = {};
  uniform_rows_ = 0;
  uniform_sum_ = 0;
  Phase("waiting-for-data");
}

// Rows fed now are good for training from min_version on (older ones are regenerated): the
// rollout waits for that version rather than generate them twice. Ranks other than 0 feed nothing.
Status GrpoLoop::Feed(int64_t min_version) {
  if (!feeder_) return Status::OK();
  feeder_->set_min_version(std::max<int64_t>(0, min_version));
  return feeder_->FeedTo(o_.prompts_per_step * (1 + o_.staleness), o_.prompts_per_step).status();
}

// A get of up to `count` rows of task train, in whole groups, none older than min_version.
queue::GetRequest GrpoLoop::TrainGet(int64_t count, int64_t min_version) const {
  queue::GetRequest req;
  req.task = kTrainTask;
  req.count = static_cast<uint32_t>(count);
  req.min = static_cast<uint32_t>(o_.group_size);
  req.lease_ms = static_cast<int64_t>(o_.lease_s * 1000);
  req.wait_ms = kGetWaitMs;
  req.holder = Holder();
  req.groups = true;
  // Multi-turn rows: tool tokens are not trained on; their turns' rewards (advantage.h).
  req.also = {"loss_mask", "token_versions", "turn_ends", "turn_rewards"};
  if (o_.grpo.routing_replay) req.also.push_back("routes");  // rl-rollout --record-routes
  if (o_.grpo.ref_from_rows) req.also.push_back(kRefRoutingColumn);  // how the reference routed
  req.has_min_version = true;
  req.min_version = min_version;
  req.regenerate_stale = o_.regenerate_stale;
  if (o_.dynamic_sampling) req.drop_uniform = "reward";
  return req;
}

Result<std::vector<Group>> GrpoLoop::TakeGroups(const queue::GetReply& reply) {
  SortedRows sorted = SortRows(reply.rows, Routes(), Tokens());
  if (!sorted.dropped.empty()) {
    spdlog::error("dropping {} rows of task train ({} malformed, the rest of their groups): {}", sorted.dropped.size(),
                  sorted.bad_rows, sorted.error.message());
    events_.Emit("bad-rows", {{"rows", sorted.dropped.size()}, {"malformed", sorted.bad_rows},
                              {"error", sorted.error.message()}});
    RL_RETURN_IF_ERROR(client_.Ack(kTrainTask, reply.lease, sorted.dropped).status());
  }
  if (!sorted.unreplayable.empty()) {
    spdlog::warn("--routing-replay: {} rows trained with their own routing: {}", sorted.unreplayable.size(),
                 sorted.routes_error.message());
    events_.Emit("bad-routes", {{"rows", sorted.unreplayable.size()}, {"error", sorted.routes_error.message()}});
  }
  WarnIfUnrouted(sorted.groups, sorted.unreplayable);
  return std::move(sorted.groups);
}

// Small pieces waste the cores (a forward pass over 8 rows costs nearly what one over 64 does):
// trains the pending groups once a micro-batch has gathered, or when `last` says no more come.
Status GrpoLoop::TrainIfEnough(std::vector<Group>* pending, bool last) {
  int64_t rows = 0;
  for (const Group& g : *pending) rows += static_cast<int64_t>(g.samples.size());
  if (pending->empty() || (rows < o_.grpo.micro_batch && !last)) return Status::OK();
  TrainPending(pending);
  return train_status_;
}

void GrpoLoop::TrainPending(std::vector<Group>* pending) {
  Phase("train");
  auto t0 = std::chrono::steady_clock::now();
  // In an order that does not depend on arrival: in sync mode (f = 1, one piece) a step's
  // result is then a function of its rows alone, so a resumed step repeats it bit for bit.
  for (Group& g : *pending) {
    std::sort(g.samples.begin(), g.samples.end(), [](const Sample& a, const Sample& b) { return a.index < b.index; });
  }
  std::sort(pending->begin(), pending->end(), [](const Group& a, const Group& b) {
    return a.samples.front().index < b.samples.front().index;
  });
  const TokenAge age = TokenAgeOf(*pending, static_cast<int64_t>(version_));
  token_age_.tokens += age.tokens;
  token_age_.older += age.older;
  train_status_ = trainer_->Accumulate(*pending);
  train_s_ += Seconds(t0);
  for (const Group& g : *pending) step_groups_.push_back(g.key);
  ++health::Progress().micro_batches;  // the watchdog's stall detection watches this
  pending->clear();
}

// More than --max-redraws groups dropped while this step's batch filled: train on what came, or
// stop with the reason when nothing did.
Status GrpoLoop::RedrawLimit(int64_t dropped_groups, int64_t kept_rows, const std::vector<uint64_t>& consumed) {
  events_.Emit("redraw-limit", {{"dropped_groups", dropped_groups}, {"kept_groups", kept_rows / o_.group_size}});
  if (kept_rows == 0) {
    if (!consumed.empty()) (void)client_.Nack(kTrainTask, 0, consumed);
    return Status::DataError("dynamic sampling dropped " + std::to_string(dropped_groups) +
                             " groups this step and kept none: every group's rewards were equal (the task is too "
                             "easy or too hard for the policy, or the verifier scores everything alike); "
                             "see --max-redraws");
  }
  spdlog::warn("step {}: dynamic sampling dropped {} groups (--max-redraws {}); training on the {} groups kept",
               step_ + 1, dropped_groups, o_.max_redraws, kept_rows / o_.group_size);
  return Status::OK();
}

// Groups the rows of a get; malformed rows are reported, consumed and left out of training.
Status GrpoLoop::TrainOrDrop(const queue::GetReply& reply, std::vector<Group>* pending, std::vector<uint64_t>* consumed) {
  RL_ASSIGN_OR_RETURN(std::vector<Group> groups, TakeGroups(reply));
  for (const Group& g : groups) {
    for (const Sample& s : g.samples) consumed->push_back(s.index);
  }
  pending->insert(pending->end(), groups.begin(), groups.end());
  return Status::OK();
}

void GrpoLoop::Evaluate(StepStats* s, nlohmann::json* fields) {
  reward_ema_ = reward_ema_ < 0 ? s->mean_reward : 0.8 * reward_ema_ + 0.2 * s->mean_reward;
  bool eval = held_out_ && o_.eval_every > 0 && step_ % o_.eval_every == 0;
  if (eval) {
    auto acc = HeldOutAccuracy();
    if (acc.ok()) {
      last_accuracy_ = *acc;
      accuracy_step_ = step_;
    }
    (*fields)["accuracy"] = last_accuracy_;
  }
  std::string why;
  if (eval && best_accuracy_ >= 0.2 && last_accuracy_ < best_accuracy_ - o_.collapse_drop) {
    why = "held-out accuracy fell from " + std::to_string(best_accuracy_) + " to " + std::to_string(last_accuracy_);
  } else if (!o_.dynamic_sampling && best_reward_ema_ >= 0.2 && reward_ema_ < best_reward_ema_ - o_.collapse_drop) {
    why = "mean reward fell from " + std::to_string(best_reward_ema_) + " to " + std::to_string(reward_ema_);
  }
  best_accuracy_ = std::max(best_accuracy_, last_accuracy_);
  best_reward_ema_ = std::max(best_reward_ema_, reward_ema_);
  if (!why.empty()) {
    spdlog::error("COLLAPSE at step {}: {} (lr {}; a lower --lr, on-policy --mode sync or a KL term may help)",
                  step_, why, o_.grpo.schedule.lr);
    events_.Emit("collapse", {{"why", why}, {"lr", o_.grpo.schedule.lr}});
  }
}

Status GrpoLoop::AfterStep(const StepStats& s0, std::vector<uint64_t> consumed, double seconds) {
  StepStats s = s0;
  // Rows generated with the weights this step started from must give the trainer's own
  // log-probabilities back (to float rounding: 1e-7 in grpo_loop_test); a larger gap means the
  // ratio compares two different distributions.
  constexpr double kGapWarn = 1e-2;
  if (!warned_gap_ && s.min_version == s.max_version && s.max_version == static_cast<int64_t>(version_) &&
      s.logprob_gap > kGapWarn) {
    warned_gap_ = true;
    spdlog::warn("step {}: on rows of the current version the rollout's log-probabilities differ from the "
                 "trainer's by {:.3g} per token: is rl-rollout's --temperature this trainer's ({})?",
                 step_ + 1, s.logprob_gap, o_.grpo.temperature);
    events_.Emit("logprob-gap", {{"gap", s.logprob_gap}, {"temperature", o_.grpo.temperature}});
  }
  ++step_;
  ++version_;
  health::Progress().version = static_cast<int64_t>(version_);
  ++health::Progress().steps;  // steps since this process started: the watchdog's escalation rule
  events_.SetStep(step_);
  // The trained groups' mean reward leaves out the groups dynamic sampling dropped (all 0 or all
  // 1): the population's mean takes them in, so it shows how the policy does, not what it trains on.
  const double population_reward = (s.mean_reward * static_cast<double>(s.samples) + uniform_sum_) /
                                   static_cast<double>(s.samples + static_cast<int64_t>(uniform_rows_));
  nlohmann::json f = {{"version", version_}, {"reward", s.mean_reward}, {"loss", s.loss},
                      {"population_reward", population_reward}, {"uniform_rows", uniform_rows_},
                      {"samples", s.samples}, {"groups", s.groups}, {"tokens", s.tokens},
                      {"samples_per_s", s.samples / seconds}, {"seconds", seconds},
                      {"clip_fraction", s.clip_fraction}, {"kl", s.kl}, {"grad_norm", s.grad_norm},
                      {"lr", s.lr}, {"updates", s.updates}, {"skipped_updates", s.skipped_updates},
                      {"logprob_gap", s.logprob_gap},
                      {"is_weight_mean", s.is_weight_mean}, {"is_weight_max", s.is_weight_max},
                      {"is_capped_fraction", s.is_capped_fraction},
                      {"value_loss", s.value_loss}, {"value_clip_fraction", s.value_clip_fraction},
                      {"sft_loss", s.sft_loss},
                      {"min_version", s.min_version}, {"max_version", s.max_version},
                      {"older_token_share", token_age_.tokens > 0 ? static_cast<double>(token_age_.older) /
                                                                        static_cast<double>(token_age_.tokens) : 0.0},
                      {"trained_groups", step_groups_}, {"train_seconds", train_s_},
                      {"train_tokens_per_s", train_s_ > 0 ? static_cast<double>(s.tokens) / train_s_ : 0.0}};
  if (o_.grpo.routing_replay) {
    f["route_agreement"] = s.route_agreement;
    f["routes_replayed"] = s.routes_replayed;
  }
  if (s.skipped_updates > 0) {
    spdlog::error("step {}: {} of {} updates skipped: their gradient was not finite (a learning rate far too high, "
                  "or values in the rows that overflow)", step_, s.skipped_updates, s.updates);
  }
  auto eval_t0 = std::chrono::steady_clock::now();
  Evaluate(&s, &f);
  f["eval_seconds"] = Seconds(eval_t0);  // rl-profile plan counts it as trainer work per step
  events_.Emit("step", f);
  std::string eta;
  if (o_.max_steps > 0) {
    double per_step = Seconds(started_) / static_cast<double>(step_ - start_step_);
    eta = " eta " + Duration(per_step * static_cast<double>(o_.max_steps - step_));
  }
  std::string kept;
  if (uniform_rows_ > 0) {
    kept = fmt::format(" (trained groups {:.3f}, {} rows dropped as uniform)", s.mean_reward, uniform_rows_);
  }
  spdlog::log(lead() ? spdlog::level::info : spdlog::level::debug,
              "step {} reward {:.3f}{} held-out {:.3f} (best {:.3f}) samples/s {:.0f} s/step {:.2f} versions {}..{}{}",
              step_, population_reward, kept, last_accuracy_, best_accuracy_, s.samples / seconds, seconds,
              s.min_version, s.max_version, eta);
  if (!lead()) return Status::OK();  // rank 0 checkpoints (and acks) every rank's rows
  Phase("checkpoint");
  auto snapshot_t0 = std::chrono::steady_clock::now();
  Checkpoint c;
  c.step = step_;
  c.version = version_;
  RL_ASSIGN_OR_RETURN(c.cursor, feeder_->Cursor());
  std::ostringstream rng;
  rng << rng_;
  c.rng = rng.str();
  c.consumed = std::move(consumed);
  c.extra = {{"best_accuracy", best_accuracy_}, {"accuracy", last_accuracy_}, {"accuracy_step", accuracy_step_},
             {"eval_size", o_.eval_size}, {"reward_ema", reward_ema_},
             {"best_reward_ema", best_reward_ema_}};
  // In host memory: the device-to-host copy is the blocking part, the write is the writer's.
  RL_ASSIGN_OR_RETURN(model::Transformer snapshot, trainer_->policy().Clone(c10::Device(c10::kCPU)));
  c.model = std::move(snapshot);
  c.adam = trainer_->optimizer().State();
  c.adam_steps = trainer_->optimizer().steps();
  if (ValueModel* critic = trainer_->critic()) {
    for (const auto& [name, t] : critic->NamedParameters()) c.critic.emplace_back(name, model::HostCopy(t));
    c.critic_adam = trainer_->critic_optimizer()->State();
    c.critic_adam_steps = trainer_->critic_optimizer()->steps();
  }
  if (publisher_) publisher_->Offer(c.version, *c.model);  // pullable before it is on disk
  writer_->Submit(std::move(c));
  // The blocking part of a checkpoint; the checkpoint event of this version marks the write's end.
  events_.Emit("snapshot", {{"version", version_}, {"seconds", Seconds(snapshot_t0)}});
  return Status::OK();
}

// On the writer thread: the checkpoint and weights are on disk, so the rows can be consumed.
void GrpoLoop::OnWritten(const Checkpoint& c, const Status& s) {
  if (!s.ok()) {
    spdlog::error("checkpoint of step {} failed: {}", c.step, s.ToString());
    events_.Emit("checkpoint-failed", {{"error", s.ToString()}});
    return;
  }
  Status acked = writer_client_->Ack(kTrainTask, 0, c.consumed).status();
  Status meta = writer_client_->MetaSet({kStepKey, std::to_string(c.step), std::nullopt});
  if (meta.ok()) meta = writer_client_->MetaSet({kVersionKey, std::to_string(c.version), std::nullopt});
  if (!acked.ok() || !meta.ok()) spdlog::error("after checkpoint {}: {} {}", c.step, acked.ToString(), meta.ToString());
  events_.Emit("checkpoint", {{"version", c.version}, {"rows", c.consumed.size()}});
}

Status GrpoLoop::Run() {
  RL_RETURN_IF_ERROR(Start());
  started_ = std::chrono::steady_clock::now();
  start_step_ = step_;
  Status status;
  while (!stop_ && !group_stopped_ && (o_.max_steps == 0 || step_ < o_.max_steps)) {
    if (group_) {  // the ranks leave together
      auto stopped = AnyRankStopped();
      if (!stopped.ok() || *stopped) {
        status = stopped.status();
        break;
      }
    }
    if (o_.staleness == 0 && writer_) RL_RETURN_IF_ERROR(writer_->Wait());  // on-policy: wait for v+1 to be out
    auto t0 = std::chrono::steady_clock::now();
    std::vector<uint64_t> consumed;
    int64_t samples = 0;
    status = group_ ? CollectRanks(&consumed, &samples) : CollectAndTrain(&consumed, &samples);
    if (stop_ || group_stopped_) break;
    if (!status.ok()) break;
    auto t1 = std::chrono::steady_clock::now();
    auto stats = trainer_->FinishStep();
    train_s_ += Seconds(t1);
    if (!stats.ok()) {
      status = stats.status();
      break;
    }
    if (group_) {  // rank 0's checkpoint lists every rank's rows
      auto all = GatherIndices(*group_, consumed);
      if (!all.ok()) {
        status = all.status();
        break;
      }
      consumed = std::move(*all);
    }
    status = AfterStep(*stats, std::move(consumed), Seconds(t0));
    if (!status.ok()) break;
  }
  Status written = writer_ ? writer_->Wait() : Status::OK();
  Phase("stopped");
  events_.Emit("stop", {{"version", version_}, {"accuracy", last_accuracy_}});
  if (stop_ || group_stopped_) return written;
  return status.ok() ? written : status;
}

}  // namespace loop


Status ApplyMode(const std::string& mode, GrpoLoopOptions* o) {
  if (mode == "sync") {
    o->staleness = 0;
    o->start_fraction = 1.0;
  } else if (mode == "semi-sync") {
    o->staleness = 1;
    o->start_fraction = 0.5;
  } else if (mode == "async") {
    o->staleness = 1;
    o->start_fraction = 0.0;
  } else {
    return Status::InvalidArgument("--mode must be sync, semi-sync or async, not '" + mode + "'");
  }
  return Status::OK();
}

Status RunGrpo(const GrpoLoopOptions& options, const std::atomic<bool>& stop) {
  loop::GrpoLoop l(options, stop);
  return l.Run();
}

}  // namespace rl::train
