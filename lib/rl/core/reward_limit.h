// The largest reward, in size, that any role takes (rl-protocol(7), LIMITS): a tool's (rl-env),
// a verifier's (rl-reward exec), a row's (rl-train). The trainer sums squares of rewards for a
// group's variance, which overflow far above any real score, and a float column holds 1e39 as
// inf; a reward refused where it is made costs one call, one refused by the trainer its group.
#pragma once

#include <cmath>

namespace rl {

constexpr double kMaxReward = 1e6;

// Finite and at most kMaxReward in size.
inline bool RewardInRange(double r) { return std::isfinite(r) && std::fabs(r) <= kMaxReward; }

}  // namespace rl
