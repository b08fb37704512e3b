// The floor under any queue on ZeroMQ: raw DEALER -> ROUTER round trips on 127.0.0.1 with the
// message sizes a queue request and its reply have, and no work between them. The ROUTER has its
// own ZeroMQ context (and I/O thread) on a thread of its own, as a server process would.
// Thread safety: MeasureZmqFloor starts and joins its own threads.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "rl/core/status.h"
#include "rl/profile/percentile.h"

namespace rl::profile {

struct FloorShape {
  int clients = 1;               // concurrent DEALERs, one thread each
  uint64_t round_trips = 1;      // per client
  size_t request_bytes = 64;
  size_t reply_bytes = 64;
  size_t rows_per_trip = 1;      // what one round trip stands for, for rows/s
  double limit_s = 30;           // wall-time bound
  const std::atomic<bool>* stop = nullptr;  // when set and true, it ends early
};

// One latency sample per round trip; rows = round trips x rows_per_trip.
Result<OpFigure> MeasureZmqFloor(const FloorShape& shape);

}  // namespace rl::profile
