// QueueDriver: what the benchmark needs from a queue under test (rl-queue, Redis streams), so one
// workload runner (workload.h) drives every system the same way.
//
// Every payload starts with the 8-byte steady-clock time (ns, native byte order) at which its put
// was sent; Get returns those stamps so the runner can time each row from put to ack.
// Thread safety: a driver is used by one thread at a time; the runner hands drivers from thread
// to thread only across thread start and join.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::profile {

// Rows one Get took: what Ack needs to consume them, and each row's put time.
struct Taken {
  uint64_t lease = 0;               // rl-queue: the lease id
  std::vector<uint64_t> indices;    // rl-queue: row indices
  std::vector<std::string> ids;     // Redis: stream entry ids
  std::vector<int64_t> stamps_ns;   // one per row, from the payload
  size_t rows() const { return stamps_ns.size(); }
  void Clear();
  // Row i's identity, for checking that every row is consumed exactly once.
  std::string Key(size_t i) const;
};

class QueueDriver {
 public:
  virtual ~QueueDriver() = default;
  // Makes the queue ready to run: the consumer task or group declared. Called on one driver,
  // before any phase starts.
  virtual Status Prepare() = 0;
  // Adds payloads.size() rows, one payload column each, in one request (one pipeline for Redis).
  virtual Status Put(const std::vector<std::string>& payloads) = 0;
  // Takes up to `max` ready rows, waiting up to wait_ms when none are. *out is cleared first;
  // no rows is not an error.
  virtual Status Get(size_t max, int wait_ms, Taken* out) = 0;
  // Consumes every row of `taken`; an error when any was not consumed.
  virtual Status Ack(const Taken& taken) = 0;
  // Acks each of `taken` with up to `window` acks in flight at once (rl-queue: a pipeline; Redis:
  // pipelined XACKs), appending to *latency_us each ack's time from its send to its reply. This
  // one acks one at a time, for a system that has no pipeline.
  virtual Status AckPipelined(const std::vector<Taken>& taken, int window, std::vector<double>* latency_us);
};

// Makes the driver of one client thread (`client` numbers them from 0).
using DriverFactory = std::function<Result<std::unique_ptr<QueueDriver>>(int client)>;

// Reads the put time a payload carries (0 when it is shorter than 8 bytes).
int64_t PayloadStamp(const char* data, size_t size);

}  // namespace rl::profile
