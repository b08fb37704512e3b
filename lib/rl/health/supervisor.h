// Supervisor: `rl-watchdog run`. Starts the roles of a pipeline file in order (each section once
// its instances heartbeat; neighbouring sections of queue clients together), watches them by
// process exit (seen at once) and by the membership table's detections, and applies
// RestartPolicy: restart the failed role only, or the whole job from the last checkpoint, or give
// up with a diagnosis. Every failure, decision, restart and readiness is an event of
// <run-dir>/events/watchdog-<id>.jsonl with its reason.
//
// Roles run in sessions of their own and their pids are kept in <run-dir>/watchdog/*.pid with
// their kernel start times, so the watchdog's death does not touch them and a new watchdog on
// the same run directory adopts them instead of starting them again. A stop signal ends the
// watchdog only; StopPipeline (rl-watchdog stop) ends the roles.
// Thread safety: one thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/health/pipeline.h"
#include "rl/health/policy.h"
#include "rl/health/watcher.h"

namespace rl::health {

struct SupervisorOptions {
  PipelineSpec pipeline;
  std::string run_dir;
  DetectorOptions detector;  // stall thresholds of the pipeline's roles are filled in by Run
};

// Exit codes of Run: 0 when the finishing role exited 0 (or the watchdog was told to stop),
// 70 after giving up.
Result<int> RunSupervisor(SupervisorOptions options, EventLog* events, const std::atomic<bool>& stop);

// Stops the watchdog of `run_dir` (if one runs) and then every role it started, newest section
// first (neighbouring sections of queue clients together). Returns how many processes were stopped.
Result<int> StopPipeline(const std::string& run_dir, double grace_s);

}  // namespace rl::health
