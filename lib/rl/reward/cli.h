// rl-reward's command line: `run` (the queue loop), `score` (JSON lines from stdin to stdout, no
// queue) and `make-data` (the demo task's prompts). RewardMain returns the exit code (sysexits).
// See man/rl-reward.1.
#pragma once

#include <cstddef>
#include <istream>
#include <ostream>

#include "rl/reward/verifier.h"

namespace rl::reward {

int RewardMain(int argc, char** argv);

// `score`: each line {"prompt", "response", "answer", ...} is written back with "reward" added.
// Lines go to the verifier `batch` at a time (a judge scores them in one pass), in order.
// A line that is not such an object, or that the verifier cannot score, is reported on stderr
// with its line number and skipped; the result is then 65 (or 69 for a broken verifier).
int RunScore(Verifier* verifier, std::istream& in, std::ostream& out, size_t batch = 64);

}  // namespace rl::reward
