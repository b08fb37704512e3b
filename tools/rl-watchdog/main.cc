// rl-watchdog: role-aware failure detection and restarts. See man/rl-watchdog.1.
#include "rl/health/cli.h"

int main(int argc, char** argv) { return rl::health::WatchdogMain(argc, argv); }
