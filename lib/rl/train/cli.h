// rl-train's command line: subcommands sft, grpo, eval and make-data (man/rl-train.1).
// TrainMain parses argv through the option registry, runs one subcommand and returns the exit
// code (sysexits).
#pragma once

namespace rl::train {

// Makes OpenMP wait passively (OMP_WAIT_POLICY=PASSIVE) unless the caller set a policy: the
// variable is read when the OpenMP runtime loads, before main, so this re-executes the program
// with it set. Returns only when nothing needed doing or the re-exec failed.
void EnsurePassiveOpenMp(char** argv);

int TrainMain(int argc, char** argv);

}  // namespace rl::train
