// rl-relay's command line: serve (the relay), publish (serve a weights file as a source, a
// stand-in for rl-train), pull (fetch the newest version into a file) and info (what each source
// holds). RelayMain parses argv through the option registry and returns the exit code (sysexits).
#pragma once

#include <string>
#include <vector>

#include "rl/weights/puller.h"

namespace rl::weights {

int RelayMain(int argc, char** argv);

// Test hooks read from the environment, for the command-line tests of every tool that pulls:
//   RL_WEIGHTS_TEST_CORRUPT_CHUNK=N    flips a bit of chunk N the first time it arrives
//   RL_WEIGHTS_TEST_CHUNK_DELAY_MS=M   sleeps M ms after each chunk, one chunk asked for at a time
//                                      (a slow pull to kill sources in)
void ApplyTestHooksFromEnv(PullOptions* options);

// "a,b,,c" -> {"a", "b", "c"}
std::vector<std::string> SplitEndpoints(const std::string& s);

// N of ".../weights-N.safetensors", or 0 when the name is not of that form.
uint64_t VersionOfWeightsFile(const std::string& path);

}  // namespace rl::weights
