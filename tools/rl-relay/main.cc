// rl-relay: holds the newest weight version and serves UCX pulls of it. See man/rl-relay.1.
#include "rl/health/spare.h"
#include "rl/weights/cli.h"

int main(int argc, char** argv) {
  rl::health::WaitIfSpare();  // a spare of rl-watchdog run waits here until it is needed
  return rl::weights::RelayMain(argc, argv);
}
