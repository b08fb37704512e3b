// rl-train: SFT warm start and GRPO training against rl-queue. See man/rl-train.1.
#include "rl/health/spare.h"
#include "rl/train/cli.h"

int main(int argc, char** argv) {
  rl::train::EnsurePassiveOpenMp(argv);
  rl::health::WaitIfSpare();  // a spare of rl-watchdog run: libtorch is loaded, now wait until needed
  return rl::train::TrainMain(argc, argv);
}
