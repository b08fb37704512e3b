// rl-watchdog: role-aware failure detection and restarts. See man/rl-watchdog.1.
#include "rl/health/cli.h"
#include "rl/health/spare.h"

int main(int argc, char** argv) {
  rl::health::WaitIfSpare();  // `rl-watchdog beat` stand-ins can be spares of a pipeline too
  return rl::health::WatchdogMain(argc, argv);
}
