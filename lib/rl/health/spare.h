// Spare role processes (`spares` in a pipeline file of rl-watchdog run): a process started ahead
// of need and held before it does any work, so that a failed instance is replaced in the time
// its state takes to load, not the time the program takes to start (rl-train and rl-rollout
// spend about a second in libtorch's start-up alone on a 2-core machine).
//
// The supervisor starts a spare with RL_SPARE_FD naming the read end of a pipe. The spare's
// main calls WaitIfSpare() before it parses its options: it blocks until the activation
// arrives (lines KEY=VALUE, the environment of the instance it becomes, such as RL_ID, then an
// empty line), sets that environment, and returns; the process goes on as that instance. When
// the pipe closes without an activation (the supervisor stopped it, or died) the spare exits 0
// at once: a spare never starts work on its own.
// Thread safety: WaitIfSpare once, from main, before other threads start.
#pragma once

#include <map>
#include <string>

#include "rl/core/status.h"

namespace rl::health {

constexpr char kSpareFdEnv[] = "RL_SPARE_FD";

// Returns at once unless RL_SPARE_FD is set. Exits the process (0) when the pipe closes without
// an activation, and with 78 (bad configuration) when RL_SPARE_FD is not an open descriptor.
void WaitIfSpare();

// The activation message for `env` (keys and values must not hold '=' in the key or a newline).
std::string EncodeActivation(const std::map<std::string, std::string>& env);
// Parses an activation message; DataError on a line that is not KEY=VALUE, or without the end.
Result<std::map<std::string, std::string>> DecodeActivation(const std::string& text);

}  // namespace rl::health
