// rl-train: SFT warm start and GRPO training against rl-queue. See man/rl-train.1.
#include "rl/train/cli.h"

int main(int argc, char** argv) {
  rl::train::EnsurePassiveOpenMp(argv);
  return rl::train::TrainMain(argc, argv);
}
