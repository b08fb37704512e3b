// WatchedQueue: a QueueClient whose calls are marked for a StopWatchdog (rl/core/stop_watchdog.h),
// so a role that was told to stop does not wait --timeout seconds on a queue that went away.
// rl-rollout and rl-reward make their queue calls through it.
// Thread safety: that of the QueueClient (one thread).
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/core/log.h"
#include "rl/core/stop_watchdog.h"
#include "rl/queue/client.h"

namespace rl::queue {

class WatchedQueue {
 public:
  // REQUIRES: *client and *watchdog (null: unwatched) outlive it.
  WatchedQueue(QueueClient* client, StopWatchdog* watchdog) : client_(client), watchdog_(watchdog) {}
  Result<GetReply> Get(const GetRequest& g) {
    StopWatchdog::Call c(watchdog_);
    return client_->Get(g);
  }
  Result<std::vector<uint64_t>> Put(const PutRequest& p) {
    StopWatchdog::Call c(watchdog_);
    return client_->Put(p);
  }
  Result<IndexReply> Ack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& rows) {
    StopWatchdog::Call c(watchdog_);
    return client_->Ack(task, lease, rows);
  }
  Result<IndexReply> Nack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& rows) {
    StopWatchdog::Call c(watchdog_);
    return client_->Nack(task, lease, rows);
  }
  Status ReleaseEarlierLeases(const std::string& task, const std::string& holder, EventLog* events) {
    StopWatchdog::Call c(watchdog_);
    return queue::ReleaseEarlierLeases(*client_, task, holder, events);
  }
  // After a waiting get was given up on a stop (ClientOptions::stop): the server still holds it
  // parked and would lease rows to it that nobody reads. Giving back the holder's leases drops
  // it, and gives back any rows it was leased meanwhile.
  void GiveUpWaitingGet(const std::string& task, const std::string& holder) {
    if (holder.empty()) return;
    StopWatchdog::Call c(watchdog_);
    auto r = client_->ReleaseHolder(task, holder);
    spdlog::info("stopping: gave up a waiting get{}", r.ok() && !r->done.empty()
                                                        ? " and gave back the " + std::to_string(r->done.size()) +
                                                              " rows it had been leased meanwhile"
                                                        : "");
  }
  // A consumer role's loop: while !stop and more(), gets `g` and hands each reply that has rows
  // to `batch`, then calls progress(false); progress(true) once at the end. A get given up on a
  // stop (ClientOptions::stop) drops the holder's parked get (GiveUpWaitingGet).
  Status Consume(const GetRequest& g, const std::atomic<bool>& stop, const std::function<bool()>& more,
                 const std::function<Status(const GetReply&)>& batch, const std::function<void(bool)>& progress) {
    while (!stop.load() && more()) {
      auto got = Get(g);
      if (!got.ok() && stop.load()) {
        GiveUpWaitingGet(g.task, g.holder);
        break;
      }
      RL_RETURN_IF_ERROR(got.status());
      if (!got->rows.empty()) RL_RETURN_IF_ERROR(batch(*got));
      progress(false);
    }
    progress(true);
    return Status::OK();
  }

 private:
  QueueClient* client_;
  StopWatchdog* watchdog_;
};

}  // namespace rl::queue
