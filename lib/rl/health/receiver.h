// HeartbeatReceiver: rl-watchdog's end of the heartbeat protocol, one ROUTER socket bound to the
// heartbeat endpoint. Roles connect to it (they never need to know whether a watchdog runs), so
// a restarted watchdog binds the same endpoint and hears every live role again.
// Thread safety: one thread.
#pragma once

#include <zmq.hpp>

#include <memory>
#include <optional>
#include <string>

#include "rl/core/status.h"
#include "rl/health/heartbeat.h"

namespace rl::health {

struct Received {
  Heartbeat hb;
  std::string routing;  // the sender's connection, for probes
};

class HeartbeatReceiver {
 public:
  // Binds `endpoint` (tcp://127.0.0.1:0 picks a free port: see endpoint()).
  static Result<std::unique_ptr<HeartbeatReceiver>> Bind(const std::string& endpoint);
  const std::string& endpoint() const { return endpoint_; }

  // Waits up to timeout_ms for one heartbeat. nullopt on timeout; a malformed message is logged
  // and skipped (a role of another version must not take the watchdog down).
  std::optional<Received> Poll(int64_t timeout_ms);
  // Asks the role behind `routing` to answer within window_ms (DecodeProbe). False if the
  // connection is gone.
  bool Probe(const std::string& routing, uint64_t rid, int64_t window_ms);

 private:
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_;
};

}  // namespace rl::health
