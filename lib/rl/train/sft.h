// Supervised warm start: next-token cross-entropy on the response tokens (answer + <eos>) of
// prompt/response pairs, AdamW, until held-out greedy accuracy first reaches a target (the policy
// is then good enough for RL to find rewards, and not yet done) or a step limit.
// Thread safety: none; trains *model in place.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/transformer.h"
#include "rl/train/adamw.h"
#include "rl/train/addition_task.h"

namespace rl::train {

struct SftOptions {
  double lr = 1e-3;
  int64_t batch_size = 256;
  int64_t max_steps = 5000;
  double target_accuracy = 0.3;
  int64_t eval_every = 25;
  int64_t eval_size = 256;
  double grad_clip = 1.0;
  uint64_t seed = 0;
  AdamWOptions adamw;
};

struct SftProgress {
  int64_t step = 0;
  double loss = 0, accuracy = 0, seconds = 0;
  bool evaluated = false;
};

struct SftResult {
  int64_t steps = 0;
  double accuracy = 0, seconds = 0;
  bool reached = false;  // the target accuracy was reached (else the step limit or a stop)
};

// Evaluates every eval_every steps, and every step once an evaluation reached half the target.
// Calls on_step after every step (evaluated: accuracy was measured at this step).
Result<SftResult> RunSft(model::Transformer* model, const std::vector<Problem>& data, const SftOptions& options,
                         const std::function<void(const SftProgress&)>& on_step,
                         const std::atomic<bool>& stop);

}  // namespace rl::train
