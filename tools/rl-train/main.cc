// rl-train: SFT warm start and GRPO training against rl-queue. See man/rl-train.1.
#include "rl/core/compute_process.h"
#include "rl/health/spare.h"
#include "rl/train/cli.h"

int main(int argc, char** argv) {
  rl::PrepareComputeProcess(argv);  // passive OpenMP, malloc that reuses large blocks
  rl::health::WaitIfSpare();  // a spare of rl-watchdog run: libtorch is loaded, now wait until needed
  return rl::train::TrainMain(argc, argv);
}
