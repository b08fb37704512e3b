// ETTR and the time lost to faults, from a run's event logs (man/rl-profile.1, "report").
//
//   productive time  the sum, over the trainer's steps that the final model keeps (for a step
//                    redone after a restart, its last completion), of the time from the end of
//                    the step before it in the same trainer process (or that process's `start`
//                    event) to the step's own `step` event.
//   wall time        from the trainer's first `start` event to its last kept step.
//   ETTR             productive time / wall time.
//
// A fault is a `failure` event of rl-watchdog run. Its time lost splits into
//   detection  from the fault (fault_ts: the exit, the last heartbeat, the last progress) to
//              the failure event;
//   restart    from the failure to readiness: the trainer's next `start` event when the trainer
//              failed or the whole job restarted, else the watchdog's `ready` event of the role;
//   catch-up   trainer work the fault threw away and the trainer must redo: from the end of the
//              last kept step before the fault to the fault (0 for other roles).
// Thread safety: plain values and reentrant functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/profile/report_events.h"

namespace rl::profile {

struct StepTime {
  int64_t step = 0;
  double start = 0, end = 0;
  std::map<std::string, double> phases;  // the trainer's seconds in each phase during the step
  // What the step event says of its update: clip_fraction, and with an off-policy correction
  // is_weight_mean, is_weight_max and is_capped_fraction (those the event has).
  std::map<std::string, double> update;
  double seconds() const { return end - start; }
};

struct FaultTime {
  std::string member, kind, reason, action;
  int64_t step = -1;                  // the pipeline's step at the failure
  double fault_ts = 0, detect_ts = 0;
  std::optional<double> ready_ts;     // none: it never came back (give-up, or the run ended)
  double detection = 0, restart = 0, catch_up = 0;
  double lost() const { return detection + restart + catch_up; }
};

struct EttrReport {
  std::string trainer;                // lane of the trainer, "train-0"
  double t0 = 0, t1 = 0;              // wall time: [t0, t1]
  double productive = 0;
  double run_s = 0;                   // first to last event of any lane
  int64_t redone = 0;                 // step completions the final model does not keep
  std::vector<StepTime> steps;        // kept steps, by step
  std::vector<FaultTime> faults;      // by time
  double wall() const { return t1 - t0; }
  double ettr() const { return wall() > 0 ? productive / wall() : 0; }
};

// NotFound when the run has no trainer lane with a start and a step.
Result<EttrReport> ComputeEttr(const RunEvents& run);
// A run's report without a trainer to time it by: no trainer, steps or faults, ETTR 0; run_s
// from the first event of any lane to the last.
EttrReport UntimedReport(const RunEvents& run);

}  // namespace rl::profile
