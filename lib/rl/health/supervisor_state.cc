// Supervisor's memory across watchdog restarts (state.json) and its count of the trainer's steps.
#include "rl/health/supervisor_internal.h"

#include <fstream>

#include "rl/core/fs.h"
#include "rl/core/json_field.h"
#include "rl/core/log.h"

namespace rl::health::supervisor_internal {

// state.json: the policy's memory, and for each running role its process and history, so that a
// watchdog restarted on the same run directory goes on where this one was (an adopted role is not
// freshly started). Written whole (a watchdog killed mid-write leaves the previous one).
void Supervisor::SaveState() {
  nlohmann::json roles = nlohmann::json::object();
  for (const auto& inst : instances_) {
    if (inst.pid == 0) continue;
    roles[inst.key] = {{"pid", inst.pid}, {"start_ticks", inst.start_ticks}, {"restarts", inst.restarts},
                       {"failed_restarts", inst.failed_restarts}, {"steps_since_start", inst.steps_since_start}};
  }
  nlohmann::json parked = nlohmann::json::array(), slots = nlohmann::json::object();
  for (const auto& inst : instances_) {
    if (inst.parked) parked.push_back(inst.key);
    if (!inst.slots.empty()) slots[inst.key] = inst.slots;
  }
  nlohmann::json j = policy_.State();
  j["roles"] = std::move(roles);
  j["placement"] = {{"parked", parked}, {"slots", slots}};
  j["trainer"] = {{"pid", trainer_pid_}, {"steps", trainer_steps_}};
  Status s = WriteFileAtomic(o_.run_dir + "/watchdog/state.json", JsonText(j) + "\n");
  if (!s.ok()) spdlog::error("state: {}", s.ToString());
  state_changed_ = false;
}

void Supervisor::LoadState() {
  std::ifstream in(o_.run_dir + "/watchdog/state.json");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return;
  policy_.Restore(j);
  if (j.contains("roles") && j["roles"].is_object()) saved_roles_ = j["roles"];
  if (j.contains("placement") && j["placement"].is_object()) saved_placement_ = j["placement"];
  const nlohmann::json& t = j.contains("trainer") ? j["trainer"] : nlohmann::json::object();
  saved_trainer_pid_ = static_cast<pid_t>(IntField(t, "pid", 0));
  saved_trainer_steps_ = UintField(t, "steps", 0);
}

// An adopted role takes its history from state.json when that names the same process (pid and
// kernel start time). Without it (a state.json from before histories were kept) the role counts
// the adopted trainer's steps so far as its own (CountTrainerSteps), as it ran beside them.
void Supervisor::RestoreHistory(Instance* inst) {
  auto it = saved_roles_.find(inst->key);
  if (it == saved_roles_.end() || !it->is_object() || it->value("pid", 0) != inst->pid ||
      it->value("start_ticks", int64_t{-2}) != inst->start_ticks) {
    return;
  }
  inst->restarts = it->value("restarts", 0);
  inst->failed_restarts = it->value("failed_restarts", 0);
  inst->steps_since_start = it->value("steps_since_start", int64_t{0});
  inst->history_restored = true;
}

// Trainer steps, from its heartbeats' "steps" counter (steps that process completed; its step
// number also jumps when it loads a checkpoint, which is no progress), counted for every running
// role as steps since its (re)start.
void Supervisor::CountTrainerSteps(pid_t pid, uint64_t steps) {
  if (pid != trainer_pid_) {
    // A trainer process heard from the first time. One this watchdog started counts from 0. One it
    // adopted completed steps before this watchdog listened: those since state.json was written
    // count for the roles that ran then (the adopted ones), all of them when state.json did not
    // say; a role this watchdog started did not see any of them.
    const Instance* trainer = nullptr;
    for (const auto& inst : instances_) {
      if (BelongsTo(pid, inst)) trainer = &inst;
    }
    trainer_pid_ = pid;
    trainer_steps_ = 0;
    if (trainer != nullptr && !trainer->child) {
      uint64_t base = pid == saved_trainer_pid_ ? std::min(saved_trainer_steps_, steps) : 0;
      for (auto& inst : instances_) {
        if (inst.pid == 0 || inst.child) continue;
        inst.steps_since_start += static_cast<int64_t>(steps - base);
      }
      trainer_steps_ = steps;
      state_changed_ = true;
    }
  }
  if (steps <= trainer_steps_) return;
  for (auto& inst : instances_) {
    // What the policy needs to know is whether a role saw a step since its (re)start.
    state_changed_ |= inst.pid != 0 && inst.steps_since_start == 0;
    inst.steps_since_start += static_cast<int64_t>(steps - trainer_steps_);
  }
  trainer_steps_ = steps;
}

}  // namespace rl::health::supervisor_internal
