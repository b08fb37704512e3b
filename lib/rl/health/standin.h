// `rl-watchdog beat`: a stand-in role. It heartbeats as role KIND in a fixed phase, moving its
// progress counter and its step at given intervals, and does nothing else. For trying a watchdog
// or a pipeline file without the learning roles (the tests do), and for giving a process of
// your own a heartbeat by running one beside it.
// Thread safety: main thread.
#pragma once

#include <atomic>
#include <string>

#include "rl/health/flags.h"

namespace rl::health {

struct StandInOptions {
  std::string role = "rollout", id = "0", phase = "generate", run_dir;
  double progress_every_s = 0.2;  // 0: the counter never moves (a stalled role)
  double step_every_s = 0;        // 0: the step never moves
  double duration_s = 0;          // then exit 0; 0: until stopped
  double stop_delay_s = 0;        // after a stop signal, heartbeat this long before exiting (a slow stop)
};

int RunStandIn(const StandInOptions& o, const HeartbeatFlags& beat, const std::atomic<bool>& stop);

}  // namespace rl::health
