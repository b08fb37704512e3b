// RunRewardLoop: rl-reward's work loop. It leases rows of task `reward` (columns prompt,
// response, answer), scores the rows of each get with one Verifier::ScoreBatch call (a judge
// runs them as one batch), and writes the `reward` column with the same put that acks the rows
// for `reward`, so a row is scored once and a crash in between loses
// nothing (the lease expires and the rows come back). Rows the verifier cannot score are nacked
// (given back at once) and logged. An idle loop waits inside a blocking get, not by polling.
// Thread safety: runs on the calling thread; *verifier and *events are used from it only.
#pragma once

#include <atomic>
#include <cstdint>

#include "rl/core/event_log.h"
#include "rl/core/stop_watchdog.h"
#include "rl/queue/client.h"
#include "rl/reward/verifier.h"

namespace rl::reward {

inline constexpr const char* kRewardTask = "reward";

struct RewardLoopOptions {
  ClientOptions client;
  uint32_t count = 256;        // rows per get
  int64_t lease_ms = 60000;
  std::string holder;          // names this role's leases ("reward/ID"); must be unique among live ones
  int64_t wait_ms = 5000;      // how long one get may wait for rows
  int64_t progress_ms = 10000; // between progress lines on stderr; 0: none
  uint64_t max_rows = 0;       // stop after this many rows scored (0: until *stop)
  StopWatchdog* watchdog = nullptr;  // may be null; marks queue calls for it
  EventLog* events = nullptr;  // may be null; must outlive the loop
};

struct RewardStats {
  uint64_t rows = 0;     // scored and acked
  uint64_t failed = 0;   // nacked because the verifier failed on them
  uint64_t lost = 0;     // scored, but the lease had expired: another reward role has them
  double reward_sum = 0;
};

// Runs until *stop becomes true (it then finishes the batch in hand) or a fatal error: the queue
// unreachable past the client's give-up time, or a broken verifier (both Unavailable).
// *stats may be null.
Status RunRewardLoop(const RewardLoopOptions& options, Verifier* verifier, const std::atomic<bool>& stop,
                     RewardStats* stats = nullptr);

}  // namespace rl::reward
