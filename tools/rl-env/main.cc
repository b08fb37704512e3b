// rl-env: the tool sandbox role of multi-turn rollouts. See man/rl-env.1.
#include "rl/env/cli.h"
#include "rl/health/spare.h"

int main(int argc, char** argv) {
  rl::health::WaitIfSpare();  // a spare of rl-watchdog run waits here until it is needed
  return rl::env::EnvMain(argc, argv);
}
