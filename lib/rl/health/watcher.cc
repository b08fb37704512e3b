#include "rl/health/watcher.h"

#include <unistd.h>

#include <algorithm>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/health/process.h"

namespace rl::health {

namespace {
const std::string& ThisHost() {
  static const std::string host = [] {
    char buf[256] = {};
    return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
  }();
  return host;
}
}  // namespace

bool LocalProcessGone(const Heartbeat& hb) {
  return hb.host == ThisHost() && hb.pid > 0 && ProcessGone(static_cast<pid_t>(hb.pid));
}

int64_t LocalHeartbeatAge(const Heartbeat& hb) {
  if (hb.host != ThisHost() || hb.sent_ms <= 0) return 0;
  return std::max<int64_t>(0, WallMillis() - hb.sent_ms);
}

Result<std::unique_ptr<Watcher>> Watcher::Open(const std::string& endpoint, DetectorOptions options,
                                               EventLog* events) {
  RL_ASSIGN_OR_RETURN(std::unique_ptr<HeartbeatReceiver> r, HeartbeatReceiver::Bind(endpoint));
  return std::unique_ptr<Watcher>(new Watcher(std::move(r), std::move(options), events));
}

nlohmann::json DetectionFields(const Detection& d) {
  // "member", not "role": the line's own role and id are the watchdog's.
  nlohmann::json f = {{"member", d.key}, {"kind", d.hb.role}, {"instance", d.hb.id}, {"pid", d.hb.pid}, {"host", d.hb.host},
                      {"role_phase", d.hb.phase}, {"role_step", d.hb.step}};
  if (!d.reason.empty()) f["reason"] = d.reason;
  if (d.event == "failed" || d.event == "suspect") f["fault_ts"] = (WallMillis() - d.silent_ms) / 1000.0;
  if (d.previous_pid) f["previous_pid"] = d.previous_pid;
  if (d.event == "probe") f["window_ms"] = d.probe_window_ms;
  return f;
}

void Watcher::Log(const Detection& d) {
  events_->Emit(d.event, DetectionFields(d));
  if (d.event == "failed" || d.event == "suspect") {
    spdlog::warn("{} {} (pid {}, phase {}, step {}): {}", d.event, d.key, d.hb.pid, d.hb.phase, d.hb.step, d.reason);
  } else {
    spdlog::info("{} {} (pid {}, phase {}, step {}){}{}", d.event, d.key, d.hb.pid, d.hb.phase, d.hb.step,
                 d.reason.empty() ? "" : ": ", d.reason);
  }
}

std::vector<Detection> Watcher::Pump(int64_t budget_ms) {
  std::vector<Detection> out;
  int64_t until = MonoMillis() + budget_ms;
  while (true) {
    auto got = receiver_->Poll(std::max<int64_t>(0, until - MonoMillis()));
    if (!got) break;
    for (auto& d : membership_.OnHeartbeat(*got, MonoMillis())) out.push_back(std::move(d));
    if (MonoMillis() >= until) break;
  }
  for (auto& d : membership_.Tick(MonoMillis())) {
    if (d.event == "probe" && !receiver_->Probe(d.routing, d.probe_rid, d.probe_window_ms)) {
      d.reason += " (the probe could not be sent)";
    }
    out.push_back(std::move(d));
  }
  for (const auto& d : out) Log(d);
  return out;
}

}  // namespace rl::health
