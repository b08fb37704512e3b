// The learning rate of each optimizer step: a linear warm-up, then constant, or a linear or
// cosine decay to min_ratio * lr at the horizon (the run's last step), as peers schedule SFT and
// RL (Hugging Face's get_cosine_schedule_with_warmup, Megatron's and verl's min_lr_ratio).
// With s the number of steps already taken (the step being taken is s + 1), W = warmup_steps,
// H = horizon and m = min_ratio:
//   s <  W:  lr * (s + 1) / W                        (no step at zero)
//   s >= W:  p = min(1, (s - W) / (H - W))
//            constant  lr
//            linear    lr * (m + (1 - m) * (1 - p))
//            cosine    lr * (m + (1 - m) * (1 + cos(pi * p)) / 2)
// So the first step after the warm-up takes lr, and the last step (s = H - 1) is one step short
// of the floor, never a wasted step at zero. Steps past the horizon stay at the floor.
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>

#include "rl/core/status.h"

namespace rl::train {

enum class LrDecay { kConstant, kLinear, kCosine };

struct LrSchedule {
  double lr = 1e-4;
  int64_t warmup_steps = 0;
  LrDecay decay = LrDecay::kConstant;
  int64_t horizon = 0;    // steps of the whole run; needed by a decay
  double min_ratio = 0;   // the floor of a decay, as a fraction of lr
};

// "constant", "linear" or "cosine"; InvalidArgument otherwise.
Result<LrDecay> ParseLrDecay(const std::string& name);

// InvalidArgument when a decay has no horizon beyond the warm-up, or min_ratio is outside [0, 1].
Status ValidateLrSchedule(const LrSchedule& s);

// The learning rate of the step taken after `steps_taken` steps.
double LearningRate(const LrSchedule& s, int64_t steps_taken);

}  // namespace rl::train
