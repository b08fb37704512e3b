// RestartPolicy: what rl-watchdog run does about a failed role (docs/design.md "Control plane").
// Restart only the failed role, unless one of these says the fault is likely to come back, in
// which case restart the whole job from the last checkpoint:
//   - the failure is in the first step after the role's (re)start (no trainer step completed
//     since it started: restarting it alone would fail the same way),
//   - the same role already failed at this same step,
//   - the restart of this role has failed twice in a row.
// After max_full_restarts full restarts, the next escalation gives up with a diagnosis. With
// restart = "job" every failure restarts the whole job (what frameworks do without roles).
// Thread safety: one thread. Pure logic: no processes, no clocks, no files.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace rl::health {

struct Failure {
  std::string key;             // role/id
  std::string reason;          // from the detection
  int64_t step = -1;           // the pipeline's (trainer's) step at the failure, -1: unknown
  int64_t steps_since_start = 0;  // trainer steps completed since this role (re)started
  int failed_restarts = 0;     // consecutive restarts of this role that failed
};

enum class Action { kRestartRole, kRestartJob, kGiveUp };
const char* ActionName(Action a);  // "restart-role", "restart-job", "give-up"

struct Decision {
  Action action;
  std::string reason;
};

class RestartPolicy {
 public:
  RestartPolicy(bool job_mode, int max_full_restarts) : job_mode_(job_mode), max_full_(max_full_restarts) {}

  Decision Decide(const Failure& f);
  int full_restarts() const { return full_restarts_; }
  // What the policy remembers (full restarts, which role failed at which step, the history), for
  // a watchdog that restarts on the same run directory to go on from: {"full_restarts": n,
  // "failed_steps": [[key, step], ...], "history": [line, ...]}. Restore ignores what it lacks.
  nlohmann::json State() const;
  void Restore(const nlohmann::json& state);
  // Every failure so far, one line each, for the diagnosis.
  const std::vector<std::string>& history() const { return history_; }

 private:
  Decision Escalate(std::string why);

  bool job_mode_;
  int max_full_;
  int full_restarts_ = 0;
  std::set<std::pair<std::string, int64_t>> failed_steps_;
  std::vector<std::string> history_;
};

}  // namespace rl::health
