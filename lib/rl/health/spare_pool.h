// SparePool: the spare processes rl-watchdog run keeps for roles with `spares = N` (spare.h).
// A spare is the role's command started with the pipeline's environment but no RL_ID, and a
// pipe whose read end it waits on; activating it writes the instance's RL_ID down the pipe and
// makes it that instance's process. Its output goes to <run-dir>/logs/KIND-spare-PID.log, also
// after it has become an instance.
// Thread safety: one thread (the supervisor's).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/health/instance.h"
#include "rl/health/pipeline.h"

namespace rl::health {

class SparePool {
 public:
  SparePool() = default;
  SparePool(const SparePool&) = delete;
  SparePool& operator=(const SparePool&) = delete;
  ~SparePool() { StopAll(); }

  // Starts spares of `spec` until it has spec->spares live ones. Returns the pids started.
  Result<std::vector<pid_t>> Fill(const PipelineSpec& p, const RoleSpec* spec, const std::string& heartbeat,
                                  const std::string& run_dir);
  // Forgets (and reaps) spares that exited before they were used; returns the role of each.
  std::vector<const RoleSpec*> Reap();
  // Makes a live spare of inst->spec the instance's process (TakeProcess): false when it has none.
  // The spare gets RL_ID and the environment of the instance's slots, and its threads are pinned
  // to the slots' CPUs.
  Result<bool> Activate(const PipelineSpec& p, const std::string& run_dir, Instance* inst);
  // Closes every spare's pipe (they exit on their own) and makes sure they are gone.
  void StopAll();
  // Live spares of `spec`.
  int Count(const RoleSpec* spec) const;

 private:
  struct Spare {
    const RoleSpec* spec;
    pid_t pid;
    int fd;  // write end of its pipe
  };
  std::vector<Spare> spares_;
};

}  // namespace rl::health
