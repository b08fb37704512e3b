// The rl-queue side of the benchmark: a QueueDriver over rl::queue::QueueClient, with one task
// ("bench", needing the column "payload") that consumes every row.
// Thread safety: as QueueDriver.
#pragma once

#include <string>

#include "rl/profile/driver.h"

namespace rl::profile {

constexpr char kBenchTask[] = "bench";
constexpr char kPayloadColumn[] = "payload";

// Drivers of clients of the rl-queue server at `endpoint`; each gives up after give_up_s.
DriverFactory RlQueueDrivers(const std::string& endpoint, double give_up_s);

}  // namespace rl::profile
