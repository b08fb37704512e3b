// The Supervisor class behind RunSupervisor (supervisor.h), shared by the files that define its
// parts: supervisor.cc (start, stop, failures, the main loop), supervisor_state.cc (state.json and
// the trainer's step count), supervisor_slots.cc (lent slots, spares, placement moves, slots).
// Not an interface: only these files include it.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/health/instance.h"
#include "rl/health/placement_driver.h"
#include "rl/health/process.h"
#include "rl/health/spare_pool.h"
#include "rl/health/supervisor.h"

namespace rl::health::supervisor_internal {

class Supervisor {
 public:
  Supervisor(SupervisorOptions o, EventLog* events)
      : o_(std::move(o)), events_(events), policy_(o_.pipeline.restart == "job", o_.pipeline.max_full_restarts) {}

  Result<int> Run(const std::atomic<bool>& stop);

 private:
  Status StartSections(size_t first, size_t last, const std::atomic<bool>& stop);
  Status StartAll(const std::atomic<bool>& stop);
  Status CheckQuotas() const;
  // Stops every role; `failed` (may be null) is the role whose failure made the stop.
  void StopAll(bool graceful, const Instance* failed = nullptr);
  void Observe(const std::vector<Detection>& ds);
  // Looks at every process; returns an exit code when the pipeline is over.
  std::optional<int> CheckProcesses();
  // "; its process heartbeats as K: set kind = ..." when inst's process heartbeats under a name
  // other than its own; empty otherwise.
  std::string MisnamedHeartbeat(const Instance& inst) const;
  std::optional<int> OnFailure(Instance* inst, const std::string& reason, double fault_ts);
  Status RestartRole(Instance* inst);
  Status RestartGroup(Instance* failed);
  void LendSlotTo(Instance* trainer);
  Status MoveSlot(Instance* from, Instance* to, const std::string& reason);
  void AssignSlots();
  void ReturnLentSlots();
  void KeepSpares();
  Instance* Find(const std::string& key);
  nlohmann::json Fields(const Instance& inst) const;
  void SaveState();
  void LoadState();
  void RestoreHistory(Instance* inst);
  void CountTrainerSteps(pid_t pid, uint64_t steps);

  SupervisorOptions o_;
  EventLog* events_;
  RestartPolicy policy_;
  std::unique_ptr<Watcher> watcher_;
  std::vector<Instance> instances_;
  SparePool spares_;
  struct SpareBackoff {
    int64_t delay_ms = 0, not_before_ms = 0;
  };
  std::map<const RoleSpec*, SpareBackoff> spare_backoff_;
  int64_t pipeline_step_ = -1;   // the trainer's step, as its heartbeats last said
  pid_t trainer_pid_ = 0;
  uint64_t trainer_steps_ = 0;   // its "steps" counter: steps that process completed
  bool state_changed_ = false;   // state.json is behind: saved at the end of the next Observe
  nlohmann::json saved_roles_ = nlohmann::json::object();  // state.json's roles, for adoption
  pid_t saved_trainer_pid_ = 0;  // state.json's trainer and its steps when that was written
  uint64_t saved_trainer_steps_ = 0;
  nlohmann::json saved_placement_;  // state.json's parked instances and slots, for a restarted watchdog
  std::unique_ptr<PlacementDriver> placement_;  // null without [placement]
};

// True for the kinds that talk to the queue and to nothing whose start or stop they wait for: they
// start together once the queue runs. With the queue running they stop cleanly in parallel (each
// gives its leases back); without it they have nothing left to save (their leases come back to
// their successors at once, by holder, and the trainer goes on from its last checkpoint) and
// nothing to wait for.
inline bool QueueClient(const std::string& kind) {
  return kind == "rollout" || kind == "reward" || kind == "ref" || kind == "train";
}

// True when a heartbeat's pid is the instance's process or runs in its session (a command that
// is a shell list runs the role as a child of the shell).
inline bool BelongsTo(uint64_t hb_pid, const Instance& inst) {
  if (inst.pid == 0) return false;
  return hb_pid == static_cast<uint64_t>(inst.pid) || ProcessSession(static_cast<pid_t>(hb_pid)) == inst.pid;
}


}  // namespace rl::health::supervisor_internal
