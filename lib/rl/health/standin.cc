#include "rl/health/standin.h"

#include <unistd.h>

#include <thread>

#include "rl/core/clock.h"
#include "rl/core/event_log.h"
#include "rl/core/fail.h"
#include "rl/health/progress.h"

namespace rl::health {

int RunStandIn(const StandInOptions& o, const HeartbeatFlags& beat, const std::atomic<bool>& stop) {
  EventLog events;
  if (!o.run_dir.empty()) {
    if (Status s = events.Open(o.run_dir, o.role, o.id); !s.ok()) return Fail("rl-watchdog", s);
  }
  auto sender = beat.Start(o.role, o.id);
  if (!sender.ok()) return Fail("rl-watchdog", sender.status());
  events.Emit("start", {{"pid", ::getpid()}});
  events.EnterPhase(o.phase);
  int64_t start = MonoMillis(), next_progress = start, next_step = start;
  int64_t progress_ms = static_cast<int64_t>(o.progress_every_s * 1000);
  int64_t step_ms = static_cast<int64_t>(o.step_every_s * 1000);
  int64_t step = 0;
  while (!stop.load() && (o.duration_s <= 0 || MonoMillis() - start < o.duration_s * 1000)) {
    int64_t now = MonoMillis();
    if (progress_ms > 0 && now >= next_progress) {
      ++Progress().rows;
      next_progress += progress_ms;
    }
    if (step_ms > 0 && now >= next_step + step_ms) {
      events.SetStep(++step);
      ++Progress().steps;
      events.Emit("step", {{"seconds", o.step_every_s}});
      next_step += step_ms;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (stop.load() && o.stop_delay_s > 0) {
    // Like a role whose clean stop waits for something that does not come (a queue that is gone):
    // it goes on heartbeating until the delay is over or it is killed.
    events.EnterPhase("stopping");
    int64_t until = MonoMillis() + static_cast<int64_t>(o.stop_delay_s * 1000);
    while (MonoMillis() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  events.EnterPhase("stopped");
  events.Emit("stop");
  return kExitOk;
}

}  // namespace rl::health
