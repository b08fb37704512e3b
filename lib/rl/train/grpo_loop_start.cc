// Where the GRPO loop (grpo_loop.h) starts: from its newest checkpoint (policy, optimizer, RNG,
// critic) or from fresh weights, and the critic of --advantage gae (a copy of the policy, or a
// backbone of its own from --critic-config).
#include <spdlog/spdlog.h>

#include <filesystem>
#include <sstream>

#include "rl/core/json_field.h"
#include "rl/model/hf_dir.h"
#include "rl/model/model_file.h"
#include "rl/train/checkpoint.h"
#include "rl/train/grpo_loop_state.h"

namespace rl::train::loop {

Status GrpoLoop::StartFrom(Checkpoint c) {
  spdlog::info("resuming from {} (step {}, version {})", CheckpointPath(o_.checkpoint_dir, c.step), c.step, c.version);
  step_ = c.step;
  version_ = c.version;
  std::istringstream(c.rng) >> rng_;
  best_accuracy_ = NumberField(c.extra, "best_accuracy", 0.0);
  // Only an accuracy measured on a held-out set of this size is comparable.
  if (IntField(c.extra, "eval_size", -1) == o_.eval_size) {
    last_accuracy_ = NumberField(c.extra, "accuracy", -1.0);
    accuracy_step_ = IntField(c.extra, "accuracy_step", c.step);
  }
  best_reward_ema_ = NumberField(c.extra, "best_reward_ema", 0.0);
  reward_ema_ = NumberField(c.extra, "reward_ema", -1.0);
  std::optional<model::Transformer> ref;
  if (o_.grpo.kl_coef > 0 && !o_.grpo.ref_from_rows) {
    RL_ASSIGN_OR_RETURN(model::LoadedModel r, model::LoadModelFile(WeightsPath(o_.checkpoint_dir, 0)));
    ref = r.model;
  }
  RL_RETURN_IF_ERROR(model::CheckVocabulary(*c.model, encoder_->dir(), "checkpoint step " + std::to_string(c.step)));
  RL_ASSIGN_OR_RETURN(std::optional<ValueModel> critic, NewCritic(*c.model));
  const bool critic_resumed = critic.has_value() && !c.critic.empty();
  if (critic_resumed) {
    Status s = critic->LoadNamedParameters(c.critic);
    if (!s.ok()) {
      return Status::Config("checkpoint step " + std::to_string(c.step) + "'s critic does not fit " +
                            (o_.critic_config.empty() ? "a copy of the policy" : "--critic-config") +
                            " (give the critic it was trained with): " + s.message());
    }
  } else if (critic) {
    spdlog::warn("checkpoint step {} has no critic: starting a new one", c.step);
  }
  RL_ASSIGN_OR_RETURN(trainer_, GrpoTrainer::Create(*c.model, ref, o_.grpo, std::move(critic)));
  RL_RETURN_IF_ERROR(trainer_->optimizer().LoadState(c.adam, c.adam_steps));
  if (critic_resumed) RL_RETURN_IF_ERROR(trainer_->critic_optimizer()->LoadState(c.critic_adam, c.critic_adam_steps));
  // The checkpoint holds the update these rows made: consume them if the last run could not.
  if (!c.consumed.empty() && lead()) RL_RETURN_IF_ERROR(client_.Ack(kTrainTask, 0, c.consumed).status());
  events_.SetStep(step_);
  events_.Emit("resume", {{"version", version_}, {"acked", lead() ? c.consumed.size() : 0}});
  if (!lead()) return Status::OK();
  std::string weights = WeightsPath(o_.checkpoint_dir, version_);
  return model::SaveModelFile(weights, trainer_->policy(), version_);
}

Status GrpoLoop::StartFresh() {
  std::string path = o_.weights.empty() ? WeightsPath(o_.checkpoint_dir, 0) : o_.weights;
  Result<model::LoadedModel> loaded = Status::NotFound(path);
  if (o_.weights.empty() && !std::filesystem::exists(path) && encoder_->dir().has_weights) {
    path = o_.prompt.model;
    auto m = model::LoadHfModel(path);
    loaded = m.ok() ? Result<model::LoadedModel>(model::LoadedModel{std::move(*m), 0}) : m.status();
    if (!loaded.ok()) return loaded.status();
  } else {
    loaded = model::LoadModelFile(path);
  }
  if (!loaded.ok()) {
    return Status::Config("no checkpoint in " + o_.checkpoint_dir + " and no starting weights (" +
                          loaded.status().message() + "): run rl-train sft first, give --weights, or a --model "
                          "directory with weights");
  }
  RL_RETURN_IF_ERROR(model::CheckVocabulary(loaded->model, encoder_->dir(), "the starting weights " + path));
  step_ = 0;
  version_ = 0;
  if (!o_.weights.empty() && lead()) {
    RL_RETURN_IF_ERROR(model::SaveModelFile(WeightsPath(o_.checkpoint_dir, 0), loaded->model, 0));
  }
  std::optional<model::Transformer> ref;
  if (o_.grpo.kl_coef > 0 && !o_.grpo.ref_from_rows) {
    RL_ASSIGN_OR_RETURN(ref, loaded->model.Clone());
  }
  RL_ASSIGN_OR_RETURN(std::optional<ValueModel> critic, NewCritic(loaded->model));
  RL_ASSIGN_OR_RETURN(trainer_, GrpoTrainer::Create(loaded->model, ref, o_.grpo, std::move(critic)));
  spdlog::info("starting from {} as version 0", path);
  return Status::OK();
}

Result<std::optional<ValueModel>> GrpoLoop::NewCritic(const model::Transformer& policy) const {
  if (o_.grpo.advantage != Advantage::kGae) return std::optional<ValueModel>();
  if (o_.critic_config.empty()) {
    RL_ASSIGN_OR_RETURN(ValueModel copy, ValueModel::FromPolicy(policy));
    return std::optional<ValueModel>(std::move(copy));
  }
  auto config = model::ConfigFromString(o_.critic_config);
  if (!config.ok()) return Status::Config("--critic-config: " + config.status().message());
  if (config->vocab_size < encoder_->dir().tokenizer->vocab_size()) {
    return Status::Config("--critic-config: vocab_size " + std::to_string(config->vocab_size) + " is below the " +
                          std::to_string(encoder_->dir().tokenizer->vocab_size()) + " tokens of " +
                          encoder_->dir().path);
  }
  RL_ASSIGN_OR_RETURN(model::Transformer backbone, model::Transformer::Create(*config, o_.seed, policy.dtype()));
  RL_ASSIGN_OR_RETURN(ValueModel own, ValueModel::FromBackbone(std::move(backbone)));
  return std::optional<ValueModel>(std::move(own));
}

}  // namespace rl::train::loop
