// Relay: the loop of `rl-relay serve` (and of a rollout that serves what it pulled). It holds the
// newest version it could get, looks every poll interval for a newer one among its upstreams
// (the trainer, other relays), pulls it (puller.h) and serves it (source.h). On start it pulls the
// newest version anyone has, so a restarted relay comes back with the newest weights without the
// trainer's help.
// Thread safety: Run on one thread; the stop flag may be set from any thread or a signal handler.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/weights/puller.h"
#include "rl/weights/source.h"

namespace rl::weights {

struct RelayOptions {
  SourceOptions source;
  PullOptions pull;     // sources = the upstreams; stall, inflight and give-up of each pull
  int poll_ms = 500;    // between looks for a newer version
  std::string id = "0";
  EventLog* events = nullptr;  // may be null; must outlive the relay
};

class Relay {
 public:
  static Result<std::unique_ptr<Relay>> Start(std::shared_ptr<UcxContext> context, RelayOptions options);
  // Pulls and serves until *stop. Errors of single pulls are logged and retried, never returned.
  Status Run(const std::atomic<bool>& stop);
  // One look: pulls and publishes a version newer than the held one if an upstream has it.
  // Returns the version held afterwards (0: none yet).
  Result<uint64_t> Step(const std::atomic<bool>& stop);
  const std::string& endpoint() const { return source_->endpoint(); }
  Source& source() { return *source_; }

 private:
  Relay(RelayOptions o) : options_(std::move(o)) {}
  RelayOptions options_;
  std::unique_ptr<Source> source_;
  std::unique_ptr<Puller> puller_;
};

}  // namespace rl::weights
