#include "rl/health/flags.h"

#include <cmath>

namespace rl::health {

void HeartbeatFlags::Bind(CommandLine& cl, CLI::App* sub) {
  cl.Bind(sub, "--heartbeat", &endpoint);
  cl.Bind(sub, "--heartbeat-interval", &interval_s)->check(CLI::Range(0.01, 3600.0));
}

Result<std::unique_ptr<HeartbeatSender>> HeartbeatFlags::Start(const std::string& role, const std::string& id,
                                                                std::map<std::string, std::string> endpoints) const {
  SenderOptions o;
  o.endpoint = endpoint;
  o.role = role;
  o.id = id;
  o.interval_ms = static_cast<int64_t>(std::llround(interval_s * 1000));
  o.endpoints = std::move(endpoints);
  auto s = HeartbeatSender::Start(std::move(o));
  if (!s.ok()) return s.status().WithContext("--heartbeat");
  return s;
}

}  // namespace rl::health
