// rl-reward: scores responses with rule-based verifiers or an external command. See man/rl-reward.1.
#include "rl/health/spare.h"
#include "rl/reward/cli.h"

int main(int argc, char** argv) {
  rl::health::WaitIfSpare();  // a spare of rl-watchdog run waits here until it is needed
  return rl::reward::RewardMain(argc, argv);
}
