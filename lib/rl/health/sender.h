// HeartbeatSender: the heartbeat thread of a role (docs/design.md "Control plane").
//
// Every interval it sends a Heartbeat to rl-watchdog over its own DEALER socket: role, id, pid,
// host, the phase and step of the process's EventLog (EventLog::Current), the weight version and
// progress counters of health::Progress(), and the role's endpoints. It answers probes: after
// the probe's window it sends an extra heartbeat carrying the CPU the process used in the
// window. Under systemd ($NOTIFY_SOCKET) it also sends READY=1 once, and with each beat a STATUS=
// line and WATCHDOG=1 while SdWatchdogGate allows (sd_watchdog.h: the role is idle, or its
// progress moved lately in a work phase), so WatchdogSec= also catches a hung work loop. Heartbeats are dropped, never queued, while the watchdog is away; the socket reconnects
// by itself, so a restarted watchdog hears every role within an interval or two.
// Thread safety: Start and Stop from one thread; the sender runs on a thread of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "rl/core/status.h"
#include "rl/health/detector.h"
#include "rl/health/heartbeat.h"

namespace rl::health {

struct SenderOptions {
  std::string endpoint;     // rl-watchdog's heartbeat endpoint; empty: sd_notify only
  std::string role, id;
  int64_t interval_ms = 1000;
  std::map<std::string, std::string> endpoints;  // reported as they are
  DetectorOptions sd_watchdog;  // when WATCHDOG=1 goes out (SdWatchdogGate); the detector's defaults
};

class HeartbeatSender {
 public:
  // Starts the thread. Returns null (and starts nothing) when there is neither an endpoint nor
  // $NOTIFY_SOCKET. InvalidArgument for a bad endpoint or interval.
  static Result<std::unique_ptr<HeartbeatSender>> Start(SenderOptions options);
  ~HeartbeatSender();  // Stop()
  HeartbeatSender(const HeartbeatSender&) = delete;
  HeartbeatSender& operator=(const HeartbeatSender&) = delete;

  // Sends a last heartbeat marked `leaving` (a role stopping on purpose is not a failure) and
  // joins the thread.
  void Stop();
  uint64_t sent() const { return seq_.load(); }

  // The heartbeat this process would send now (no probe fields).
  Heartbeat Current() const;

 private:
  explicit HeartbeatSender(SenderOptions options);
  void Loop();

  SenderOptions o_;
  std::string host_;
  std::string notify_socket_;  // $NOTIFY_SOCKET when the sender started; empty: not under systemd
  int64_t started_ms_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> seq_{0};
  std::thread thread_;
  bool stopped_ = false;
};

// CPU time (user + system) this process has used, in milliseconds.
int64_t ProcessCpuMillis();

}  // namespace rl::health
