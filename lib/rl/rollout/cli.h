// rl-rollout's command line: `run` (the queue loop) and `generate` (JSON lines from stdin to
// stdout, no queue). RolloutMain returns the exit code (sysexits). See man/rl-rollout.1.
#pragma once

namespace rl::rollout {

int RolloutMain(int argc, char** argv);

// OpenMP's threads spin while they wait unless OMP_WAIT_POLICY=PASSIVE, which starves the other
// roles sharing the cores. The runtime reads the variable when it is loaded, so when it is unset
// this sets it and re-executes the program (/proc/self/exe) with the same arguments; it returns
// only when the variable was already set or the re-exec failed.
void EnsurePassiveOpenMp(char** argv);

}  // namespace rl::rollout
