// StopWatchdog: makes a role exit soon after a stop signal even when the queue has gone away.
//
// A role that gets SIGTERM finishes the queue call in hand (a blocking get, the put of its
// batch), but the client retries an unanswered call for --timeout seconds. When a stop has been
// requested and a queue call is still running `grace_ms` after both the stop and the call's
// start, the queue is not answering: there is nothing left to write or give back (leased rows come
// back when their lease expires), so the watchdog prints one line on stderr and ends the process
// with 75 (EX_TEMPFAIL). Work outside queue calls (generating a batch) is never cut short.
// Used by rl-rollout and rl-reward; header-only.
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
#include "rl/core/status.h"
#include "rl/queue/client.h"

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

// A QueueClient whose calls are marked for a StopWatchdog (null: unwatched), as rl-rollout and
// rl-reward make them. REQUIRES: *client and *watchdog outlive it.
class WatchedQueue {
 public:
  WatchedQueue(queue::QueueClient* client, StopWatchdog* watchdog) : client_(client), watchdog_(watchdog) {}
  Result<queue::GetReply> Get(const queue::GetRequest& g) {
    StopWatchdog::Call c(watchdog_);
    return client_->Get(g);
  }
  Result<std::vector<uint64_t>> Put(const queue::PutRequest& p) {
    StopWatchdog::Call c(watchdog_);
    return client_->Put(p);
  }
  Result<queue::IndexReply> Nack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& rows) {
    StopWatchdog::Call c(watchdog_);
    return client_->Nack(task, lease, rows);
  }
  Status ReleaseEarlierLeases(const std::string& task, const std::string& holder, EventLog* events) {
    StopWatchdog::Call c(watchdog_);
    return queue::ReleaseEarlierLeases(*client_, task, holder, events);
  }

 private:
  queue::QueueClient* client_;
  StopWatchdog* watchdog_;
};

}  // namespace rl
