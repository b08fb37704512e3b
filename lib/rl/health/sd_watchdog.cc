#include "rl/health/sd_watchdog.h"

#include <algorithm>
#include <cstdio>

namespace rl::health {

bool SdWatchdogGate::Active(const Heartbeat& hb) const {
  auto it = rules_.active_phases.find(hb.role);
  return it != rules_.active_phases.end() && it->second.count(hb.phase) > 0;
}

bool SdWatchdogGate::Ping(const Heartbeat& hb, int64_t now_ms, int64_t cpu_ms) {
  double busy = started_ ? double(cpu_ms - last_cpu_ms_) / double(std::max<int64_t>(1, now_ms - last_ms_)) : 0;
  if (!started_ || hb.phase != phase_ || hb.ProgressSum() != progress_) {
    started_ = true;
    phase_ = hb.phase;
    progress_ = hb.ProgressSum();
    moved_ms_ = now_ms;
  }
  last_ms_ = now_ms;
  last_cpu_ms_ = cpu_ms;
  why_.clear();
  if (!Active(hb)) return true;
  auto stall = rules_.stall_ms.find(hb.role);
  int64_t threshold = stall == rules_.stall_ms.end() ? 0 : stall->second;
  int64_t still = now_ms - moved_ms_;
  if (still <= threshold) return true;
  bool probed = rules_.probe_stalls.count(hb.role) > 0;
  if (probed && busy >= rules_.busy_cores) return true;
  char buf[160];
  std::snprintf(buf, sizeof buf, "no progress in phase %s for %.1f s%s", hb.phase.c_str(), still / 1000.0,
                probed ? " and the CPU idle" : "");
  why_ = buf;
  return false;
}

}  // namespace rl::health
