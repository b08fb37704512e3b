// rl-reward: scores responses with rule-based verifiers or an external command. See man/rl-reward.1.
#include "rl/reward/cli.h"

int main(int argc, char** argv) { return rl::reward::RewardMain(argc, argv); }
