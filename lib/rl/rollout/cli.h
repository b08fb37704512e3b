// rl-rollout's command line: `run` (the queue loop) and `generate` (JSON lines from stdin to
// stdout, no queue). RolloutMain returns the exit code (sysexits). See man/rl-rollout.1.
#pragma once

namespace rl::rollout {

int RolloutMain(int argc, char** argv);

}  // namespace rl::rollout
