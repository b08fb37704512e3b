#include "rl/health/policy.h"

#include "rl/core/json_field.h"

namespace rl::health {

const char* ActionName(Action a) {
  switch (a) {
    case Action::kRestartRole: return "restart-role";
    case Action::kRestartJob: return "restart-job";
    case Action::kGiveUp: return "give-up";
  }
  return "?";
}

Decision RestartPolicy::Escalate(std::string why) {
  if (full_restarts_ >= max_full_) {
    return {Action::kGiveUp, why + "; " + std::to_string(full_restarts_) + " full restart" +
                                 (full_restarts_ == 1 ? "" : "s") + " already did not help"};
  }
  ++full_restarts_;
  return {Action::kRestartJob, why};
}

nlohmann::json RestartPolicy::State() const {
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& [key, step] : failed_steps_) steps.push_back({key, step});
  return {{"full_restarts", full_restarts_}, {"failed_steps", steps}, {"history", history_}};
}

void RestartPolicy::Restore(const nlohmann::json& state) {
  if (!state.is_object()) return;
  full_restarts_ = static_cast<int>(IntField(state, "full_restarts", 0));
  auto steps = state.find("failed_steps");
  for (size_t i = 0; steps != state.end() && steps->is_array() && i < steps->size(); ++i) {
    const auto& e = (*steps)[i];
    if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_number_integer()) {
      failed_steps_.insert({e[0].get<std::string>(), e[1].get<int64_t>()});
    }
  }
  auto history = state.find("history");
  for (size_t i = 0; history != state.end() && history->is_array() && i < history->size(); ++i) {
    if ((*history)[i].is_string()) history_.push_back((*history)[i].get<std::string>());
  }
}

Decision RestartPolicy::Decide(const Failure& f) {
  history_.push_back(f.key + " at step " + std::to_string(f.step) + ": " + f.reason);
  bool seen_step = f.step >= 0 && !failed_steps_.insert({f.key, f.step}).second;
  if (job_mode_) return Escalate("restart policy 'job' restarts everything on any failure");
  if (f.failed_restarts >= 2) return Escalate("the restart of " + f.key + " failed twice");
  if (seen_step) return Escalate(f.key + " failed twice at step " + std::to_string(f.step));
  if (f.steps_since_start == 0) {
    return Escalate(f.key + " failed in the first step after its (re)start");
  }
  return {Action::kRestartRole, "restart " + f.key + " only"};
}

}  // namespace rl::health
