// rl-watchdog's command line: monitor, run and stop (man/rl-watchdog.1). WatchdogMain parses
// argv through the option registry and returns the process exit code (sysexits).
#pragma once

namespace rl::health {

int WatchdogMain(int argc, char** argv);

}  // namespace rl::health
