// The Redis streams side of the benchmark, over hiredis: put is `batch` XADDs in one pipeline,
// get is XREADGROUP with COUNT=batch (BLOCK when the caller waits), ack is one XACK of the rows a
// get took. This part alone needs hiredis, so it is compiled into rl-profile only (see
// tools/rl-profile/CMakeLists.txt), and handed to ProfileMain as a hook.
// Thread safety: as QueueDriver.
#pragma once

#include "rl/profile/driver.h"

namespace rl::profile {

// Drivers of hiredis clients of the redis-server on 127.0.0.1:port.
DriverFactory RedisDrivers(int port);

}  // namespace rl::profile
