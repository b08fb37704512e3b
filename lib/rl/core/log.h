// Logging to stderr through spdlog. stdout is data; everything a person reads goes here.
// Thread safety: spdlog's stderr sink is thread-safe (the _mt variant is used).
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "rl/core/status.h"

namespace rl {

// Sets up the default logger as "<tool>: message" on stderr at the given level
// ("trace", "debug", "info", "warn", "error", "off").
Status InitLogging(const std::string& tool, const std::string& level);

}  // namespace rl
