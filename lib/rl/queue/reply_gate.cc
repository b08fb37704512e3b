#include "rl/queue/reply_gate.h"

namespace rl::queue {

uint64_t ReplyGate::Limit(uint64_t written, uint64_t synced, int64_t now_ms) {
  switch (policy_) {
    case FsyncPolicy::kAlways:
      return synced;
    case FsyncPolicy::kNever:
      return written + kNeverUnwrittenBytes;
    case FsyncPolicy::kBatch:
      break;
  }
  while (!unsynced_sent_.empty() && unsynced_sent_.front().first <= synced) unsynced_sent_.pop_front();
  bool window_open =
      interval_ms_ > 0 && (unsynced_sent_.empty() || now_ms - unsynced_sent_.front().second < interval_ms_);
  return window_open ? written : synced;
}

void ReplyGate::Sent(uint64_t need, uint64_t synced, int64_t now_ms) {
  if (policy_ != FsyncPolicy::kBatch || need <= synced) return;
  if (unsynced_sent_.empty() || unsynced_sent_.back().first < need) unsynced_sent_.emplace_back(need, now_ms);
}

}  // namespace rl::queue
