// Progress counters of this process, read by its heartbeat (docs/design.md "Control plane").
//
// A role's work loop bumps them where work is finished (a batch of tokens generated, rows scored,
// a micro-batch trained); the heartbeat thread only reads them. So a loop blocked in an active
// phase stops moving its counters while its heartbeat thread keeps beating, and the watchdog can
// tell a stalled role from a dead one. Process-wide on purpose: one role per process, and the
// loops need no plumbing to reach them.
// Thread safety: atomics; any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

namespace rl::health {

struct ProgressCounters {
  std::atomic<uint64_t> tokens{0};         // tokens generated (rollout)
  std::atomic<uint64_t> rows{0};           // rows finished and written (rollout, reward)
  std::atomic<uint64_t> micro_batches{0};  // forward/backward passes done (train)
  std::atomic<uint64_t> requests{0};       // requests answered (queue)
  std::atomic<uint64_t> steps{0};          // optimizer steps this process completed (train)
  std::atomic<int64_t> version{-1};        // weight version in use; -1: none yet

  // The non-zero counters by name, as heartbeats carry them.
  std::map<std::string, uint64_t> Snapshot() const;
};

// This process's counters.
ProgressCounters& Progress();

}  // namespace rl::health
