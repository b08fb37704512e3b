// rl-profile queue: the benchmark of rl-queue (man/rl-profile.1, "queue").
//
// For each row size it measures, in one run: the ZeroMQ floor (raw DEALER -> ROUTER round trips
// of the same sizes), Redis streams (when redis-server is found and a Redis driver is linked in),
// and rl-queue under each fsync policy (a fresh server each time), all with the same workload
// (workload.h), `runs` times each, alternating between systems; then it prints each figure (the
// median run's rows/s, percentiles over all runs' samples) with its ratios to Redis and the floor.
// Thread safety: call from one thread; it starts and joins its own.
#pragma once

#include <atomic>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "rl/profile/driver.h"
#include "rl/profile/report.h"
#include "rl/profile/workload.h"

namespace rl::profile {

struct QueueProfileOptions {
  Workload workload;                           // producers, consumers, batch; rows when `rows` is 0
  uint64_t rows = 0;                           // per producer and pass; 0: sized per row size
  std::vector<size_t> row_bytes = {1024, 65536};
  std::vector<std::string> fsync = {"always", "batch", "never"};
  std::string redis = "auto";                  // auto (redis-server on PATH), off, or its path
  std::string connect;                         // an rl-queue server to measure instead of starting one
  bool in_process = false;                     // the server on a thread here, not a child process
  int runs = 0;                                // runs of each system, alternating; 0: 3, or 1 with `rows`
  bool json = false;                           // JSON lines instead of a table
  const std::atomic<bool>* stop = nullptr;     // when set and true, stop early (a signal)
};

// What the rl library cannot link itself: the Redis driver needs hiredis (tools/rl-profile).
struct ProfileHooks {
  std::function<DriverFactory(int port)> redis_drivers;  // empty: no Redis baseline
};

// Rows per producer and pass when --rows is not given: 8192, or fewer to stay within 64 MiB of
// payload, but at least 4 batches.
uint64_t DefaultRows(size_t row_bytes, size_t batch);

// Runs every configuration and prints the figures on `out` as each row size completes.
Result<std::vector<Figure>> RunQueueProfile(const QueueProfileOptions& options, const ProfileHooks& hooks,
                                            std::ostream& out);

}  // namespace rl::profile
