// rl-rollout: generates responses with per-token log-probabilities. See man/rl-rollout.1.
#include "rl/rollout/cli.h"

int main(int argc, char** argv) {
  rl::rollout::EnsurePassiveOpenMp(argv);
  return rl::rollout::RolloutMain(argc, argv);
}
