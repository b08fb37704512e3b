// rl-train's command line: subcommands sft, grpo, eval and make-data (man/rl-train.1).
// TrainMain parses argv through the option registry, runs one subcommand and returns the exit
// code (sysexits).
#pragma once

namespace rl::train {

int TrainMain(int argc, char** argv);

}  // namespace rl::train
