// rl-profile decode: generation tokens/s with the KV cache and without it (a full forward pass
// over every active sequence each step, the baseline measured in the same run), and training
// tokens/s (forward, backward and AdamW over the generated sequences, as a GRPO step does).
// Lives in lib/rl/train because it needs the model and the trainer; tools/rl-profile adds it
// when the libtorch parts are built.
// Thread safety: runs on the calling thread; libtorch uses --threads intra-op threads.
#pragma once

#include <string>

#include "rl/core/options.h"
#include "rl/core/status.h"
#include "rl/profile/cli.h"

namespace rl::train {

struct DecodeProfileOptions {
  std::string weights;         // a model file; empty: a random model of the demo's shape
  int64_t sequences = 256;     // prompts generated from
  int64_t slots = 64;          // sequences decoded at once
  int64_t max_new_tokens = 16; // every response runs this long (no <eos> stop), so paths compare
  int threads = 1;
  uint64_t seed = 1;
  bool json = false;
};

struct DecodeFigure {
  std::string path;  // "kv-cache", "no-cache", "train"
  int64_t tokens = 0;  // response tokens generated, or sequence tokens trained on
  double seconds = 0;
  double tokens_per_s() const { return seconds > 0 ? static_cast<double>(tokens) / seconds : 0; }
};

// The three figures in the order above. Config/IOError when the weights cannot be loaded.
Result<std::vector<DecodeFigure>> MeasureDecode(const DecodeProfileOptions& options);

// Registers `decode` on rl-profile's command line (see profile/cli.h).
profile::Subcommand AddDecodeProfile(CommandLine& cl);

}  // namespace rl::train
