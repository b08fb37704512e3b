// StopWatchdog: makes a role exit soon after a stop signal even when the queue has gone away.
//
// A role that gets SIGTERM finishes the queue call in hand (a blocking get, the put of its
// batch), but the client retries an unanswered call for --timeout seconds. When a stop has been
// requested and a queue call is still running `grace_ms` after both the stop and the call's
// start, the queue is not answering: there is nothing left to write or give back (leased rows come
// back when their lease expires), so the watchdog prints one line on stderr and ends the process
// with 75 (EX_TEMPFAIL). Work outside queue calls (generating a batch) is never cut short.
// Used by rl-rollout and rl-reward (through queue::WatchedQueue, rl/queue/watched_queue.h); it
// knows nothing of the queue itself, only of calls marked by Call. Header-only.
// Thread safety: Call may be used from the loop thread while the watchdog thread reads.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/status.h"  // kExitTempFail

namespace rl {

class StopWatchdog {
 public:
  // REQUIRES: `stop` outlives the watchdog.
  StopWatchdog(const std::atomic<bool>& stop, int64_t grace_ms, std::string tool)
      : stop_(stop), grace_ms_(grace_ms), tool_(std::move(tool)), thread_([this] { Watch(); }) {}
  ~StopWatchdog() {
    done_ = true;
    thread_.join();
  }
  StopWatchdog(const StopWatchdog&) = delete;
  StopWatchdog& operator=(const StopWatchdog&) = delete;

  // Marks a queue call in progress for its lifetime; a null watchdog is allowed.
  class Call {
   public:
    explicit Call(StopWatchdog* w) : w_(w) {
      if (w_) w_->since_ms_ = MonoMillis();
    }
    ~Call() {
      if (w_) w_->since_ms_ = 0;
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    StopWatchdog* w_;
  };

 private:
  void Watch() {
    int64_t stop_seen = 0;
    while (!done_.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (!stop_.load()) continue;
      int64_t now = MonoMillis();
      if (stop_seen == 0) stop_seen = now;
      int64_t since = since_ms_.load();
      if (since != 0 && now - std::max(since, stop_seen) > grace_ms_) {
        std::fprintf(stderr, "%s: stopping: the queue does not answer; exiting now (leased rows come back when "
                     "their lease expires)\n", tool_.c_str());
        std::_Exit(kExitTempFail);
      }
    }
  }

  const std::atomic<bool>& stop_;
  int64_t grace_ms_;
  std::string tool_;
  std::atomic<int64_t> since_ms_{0};
  std::atomic<bool> done_{false};
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace rl
