// SdWatchdogGate: whether a role's heartbeat may carry systemd's WATCHDOG=1 (sd_notify.h), so that
// WatchdogSec= catches a work loop that hangs, not only a process that froze.
//
// The heartbeat thread keeps beating while the work loop is stuck, so pinging with every beat
// would keep a hung role alive forever. The gate applies the detector's rules (detector.h) to the
// role's own heartbeats:
//
//   idle phases    (waiting for data or weights, writing, checkpointing: any phase that is not
//                  active for the role) -> ping.
//   active phases  (train for a trainer, generate for a rollout) -> ping while a progress counter
//                  or the phase changed within the role's stall threshold (stall_ms: 30 s for a
//                  trainer, 60 s for a rollout by default). Past it, a role whose stall a probe
//                  confirms (a rollout) still pings while it keeps busy_cores of CPU busy since
//                  the previous beat (a long generation, as the probe would find); otherwise the
//                  pings stop, and systemd kills the role WatchdogSec later.
//
// Time and CPU are passed in, so the rules are tested without sleeping.
// Thread safety: one thread (the heartbeat thread).
#pragma once

#include <cstdint>
#include <string>

#include "rl/health/detector.h"
#include "rl/health/heartbeat.h"

namespace rl::health {

class SdWatchdogGate {
 public:
  // Only active_phases, stall_ms, probe_stalls and busy_cores of `rules` are used.
  explicit SdWatchdogGate(DetectorOptions rules = DetectorOptions()) : rules_(std::move(rules)) {}

  // Whether `hb`, sent at now_ms (monotonic) when the process had used cpu_ms of CPU
  // (ProcessCpuMillis), may carry WATCHDOG=1. When not, why() says why.
  bool Ping(const Heartbeat& hb, int64_t now_ms, int64_t cpu_ms);
  const std::string& why() const { return why_; }

 private:
  bool Active(const Heartbeat& hb) const;

  DetectorOptions rules_;
  bool started_ = false;
  std::string phase_;
  uint64_t progress_ = 0;
  int64_t moved_ms_ = 0;  // the last change of phase or of a progress counter
  int64_t last_ms_ = 0, last_cpu_ms_ = 0;  // the previous call, for the CPU rate since
  std::string why_;
};

}  // namespace rl::health
