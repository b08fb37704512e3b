// The heartbeat options every role takes (--heartbeat, --heartbeat-interval), and the sender
// they start. Off by default: a role started without --heartbeat or RL_HEARTBEAT sends nothing
// (unless systemd gave it a $NOTIFY_SOCKET).
//
//   health::HeartbeatFlags hb;  hb.Bind(cl, sub);          // with the other options
//   auto sender = hb.Start("rollout", id, {{"queue", connect}});  // after parsing
// Thread safety: main thread.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "rl/core/options.h"
#include "rl/health/sender.h"

namespace rl::health {

struct HeartbeatFlags {
  std::string endpoint;
  double interval_s = 1.0;

  void Bind(CommandLine& cl, CLI::App* sub);
  // The sender (null when heartbeats are off). Errors are usage errors of the two options.
  Result<std::unique_ptr<HeartbeatSender>> Start(const std::string& role, const std::string& id,
                                                  std::map<std::string, std::string> endpoints = {}) const;
};

}  // namespace rl::health
