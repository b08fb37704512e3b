// Watcher: the part rl-watchdog's monitor and run modes share. It owns the heartbeat receiver
// and the membership table, sends the probes the table asks for, and appends every detection to
// the watchdog's event log with its reason.
// Thread safety: one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/health/detector.h"
#include "rl/health/receiver.h"

namespace rl::health {

class Watcher {
 public:
  // Binds `endpoint`. *events may be disabled; it must outlive the Watcher.
  static Result<std::unique_ptr<Watcher>> Open(const std::string& endpoint, DetectorOptions options,
                                               EventLog* events);

  // Takes heartbeats for up to budget_ms, then applies the time rules; returns the detections.
  std::vector<Detection> Pump(int64_t budget_ms);
  Membership& membership() { return membership_; }
  const std::string& endpoint() const { return receiver_->endpoint(); }

 private:
  Watcher(std::unique_ptr<HeartbeatReceiver> r, DetectorOptions o, EventLog* events)
      : receiver_(std::move(r)), membership_(std::move(o)), events_(events) {}
  void Log(const Detection& d);

  std::unique_ptr<HeartbeatReceiver> receiver_;
  Membership membership_;
  EventLog* events_;
};

// The JSON fields of a detection's event line (member, kind, pid, phase, step, reason, fault_ts...).
nlohmann::json DetectionFields(const Detection& d);

// DetectorOptions::process_gone for this host: a heartbeat from this host whose pid is gone.
bool LocalProcessGone(const Heartbeat& hb);
// How long ago a heartbeat from this host was sent (by its sent_ms); 0 for other hosts, whose
// clocks may differ, and for heartbeats that do not say.
int64_t LocalHeartbeatAge(const Heartbeat& hb);

}  // namespace rl::health
