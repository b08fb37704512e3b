// rl-rollout: generates responses with per-token log-probabilities. See man/rl-rollout.1.
#include "rl/core/compute_process.h"
#include "rl/health/spare.h"
#include "rl/rollout/cli.h"

int main(int argc, char** argv) {
  rl::PrepareComputeProcess(argv);  // passive OpenMP, malloc that reuses large blocks
  rl::health::WaitIfSpare();  // a spare of rl-watchdog run: libtorch is loaded, now wait until needed
  return rl::rollout::RolloutMain(argc, argv);
}
