// Stop signals: SIGINT and SIGTERM set a flag that long-running loops watch.
#pragma once

#include <atomic>

namespace rl {

// Installs handlers once; returns the flag they set.
const std::atomic<bool>& InstallStopSignals();

}  // namespace rl
