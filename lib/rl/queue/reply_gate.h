// ReplyGate: how far the log must be before a reply may go, by fsync policy (man/rl-queue.1,
// DURABILITY). Replies are sent in log order; Limit() is the log position up to which they may
// go now:
//   always  synced;
//   batch   written, while no reply sent before its records were synced has waited
//           `interval_ms` or more for that sync; then synced, until the syncs catch up. So a
//           power loss loses at most `interval_ms` of acknowledged changes (0: every reply waits
//           for its sync, as under always);
//   never   written + kNeverUnwrittenBytes (a kill -9 loses at most that much).
// Time is passed in, so the rule is tested without a slow disk.
// Thread safety: one thread.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>

#include "rl/queue/durable.h"

namespace rl::queue {

// --fsync never: how far the log may be behind the replies sent (what a kill -9 can lose).
constexpr uint64_t kNeverUnwrittenBytes = 16u << 20;

class ReplyGate {
 public:
  ReplyGate(FsyncPolicy policy, int64_t interval_ms) : policy_(policy), interval_ms_(interval_ms) {}

  uint64_t Limit(uint64_t written, uint64_t synced, int64_t now_ms);
  // A reply that needed the log up to `need` was sent at now_ms.
  void Sent(uint64_t need, uint64_t synced, int64_t now_ms);

 private:
  FsyncPolicy policy_;
  int64_t interval_ms_;
  // batch: replies sent before their records were synced, as (log position, sent at ms); only
  // the last reply of each position, in order.
  std::deque<std::pair<uint64_t, int64_t>> unsynced_sent_;
};

}  // namespace rl::queue
