// Time helpers: a monotonic clock for deadlines and a wall clock for anything stored or logged.
#pragma once

#include <chrono>
#include <cstdint>

namespace rl {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// Milliseconds since the Unix epoch (stored in logs, leases, events).
inline int64_t WallMillis() {
  return std::chrono::duration_cast<Millis>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds since the Unix epoch with fractions (the "ts" of event-log lines).
inline double WallSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

inline int64_t MonoMillis() {
  return std::chrono::duration_cast<Millis>(Clock::now().time_since_epoch()).count();
}

}  // namespace rl
