// Heartbeat: the liveness message every role sends to rl-watchdog (man/rl-watchdog.1, "HEARTBEAT
// PROTOCOL"), and the probe the watchdog answers it with.
//
//   heartbeat (role -> watchdog):  "RLP1" | header {op 32, rid, seq, from} | body (msgpack map)
//   probe     (watchdog -> role):  "RLP1" | header {op 33, rid, seq, from} | body {window_ms}
//
// A heartbeat with rid 0 is periodic; a role answers a probe with an extra heartbeat whose rid is
// the probe's and whose body holds cpu_busy, the fraction of one core the process used during the
// probe window. seq numbers every heartbeat of one process incarnation, so gaps show.
// Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::health {

// RLP1 op codes of the health protocol, above the queue's range (lib/rl/wire/envelope.h).
constexpr uint8_t kOpHeartbeat = 32;
constexpr uint8_t kOpProbe = 33;

struct Heartbeat {
  std::string role;        // queue, rollout, reward, ref, train, relay
  std::string id;          // instance id (--id)
  uint64_t pid = 0;
  std::string host;
  std::string phase;       // the role's event-log phase: train, generate, waiting-for-data, ...
  int64_t step = 0;        // the role's event-log step
  int64_t version = -1;    // weight version in use (-1: none)
  uint64_t interval_ms = 1000;
  int64_t started_ms = 0;  // wall-clock start of this process (incarnation)
  int64_t sent_ms = 0;     // wall clock when this heartbeat was sent (0: not said)
  uint64_t seq = 0;
  uint64_t probe_rid = 0;  // non-zero: the answer to that probe
  double cpu_busy = -1;    // probe answers: cores busy during the probe window; -1 otherwise
  bool leaving = false;    // the last heartbeat of a role that stops on purpose
  std::map<std::string, uint64_t> counters;      // tokens, rows, micro_batches, ...
  std::map<std::string, std::string> endpoints;  // queue, bind, ...

  // "train/0"
  std::string Key() const { return role + "/" + id; }
  // Sum of the progress counters: changes whenever any of them moves.
  uint64_t ProgressSum() const;
};

std::vector<std::string> EncodeHeartbeat(const Heartbeat& hb);
// Decodes the frames of a heartbeat (without a routing frame). Protocol on malformed input.
Result<Heartbeat> DecodeHeartbeat(const std::vector<std::string>& frames);

std::vector<std::string> EncodeProbe(uint64_t rid, int64_t window_ms);
struct Probe {
  uint64_t rid = 0;
  int64_t window_ms = 0;
};
Result<Probe> DecodeProbe(const std::vector<std::string>& frames);

}  // namespace rl::health
