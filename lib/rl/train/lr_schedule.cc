#include "rl/train/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace rl::train {

Result<LrDecay> ParseLrDecay(const std::string& name) {
  if (name == "constant") return LrDecay::kConstant;
  if (name == "linear") return LrDecay::kLinear;
  if (name == "cosine") return LrDecay::kCosine;
  return Status::InvalidArgument("unknown learning-rate decay '" + name + "' (constant, linear or cosine)");
}

Status ValidateLrSchedule(const LrSchedule& s) {
  if (!(s.min_ratio >= 0 && s.min_ratio <= 1)) {
    return Status::InvalidArgument("the learning-rate floor ratio must be in [0, 1], not " + std::to_string(s.min_ratio));
  }
  if (s.decay != LrDecay::kConstant && s.horizon <= s.warmup_steps) {
    return Status::InvalidArgument("a learning-rate decay needs a step limit (--max-steps " +
                                   std::to_string(s.horizon) + ") beyond the warm-up (" +
                                   std::to_string(s.warmup_steps) + " steps)");
  }
  return Status::OK();
}

double LearningRate(const LrSchedule& s, int64_t steps_taken) {
  if (steps_taken < s.warmup_steps) {
    return s.lr * static_cast<double>(steps_taken + 1) / static_cast<double>(s.warmup_steps);
  }
  if (s.decay == LrDecay::kConstant || s.horizon <= s.warmup_steps) return s.lr;
  double p = std::min(1.0, static_cast<double>(steps_taken - s.warmup_steps) /
                               static_cast<double>(s.horizon - s.warmup_steps));
  double shape = s.decay == LrDecay::kLinear ? 1 - p : (1 + std::cos(M_PI * p)) / 2;
  return s.lr * (s.min_ratio + (1 - s.min_ratio) * shape);
}

}  // namespace rl::train
