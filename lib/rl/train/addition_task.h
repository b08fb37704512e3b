// rl-train's view of the demo task (lib/rl/task/addition.h, shared with rl-reward), and the
// exact-match check on token ids that held-out evaluation uses.
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <vector>

#include "rl/task/addition.h"

namespace rl::train {

using task::HeldOutSet;
using task::IsCorrect;
using task::IsHeldOut;
using task::kHeldOutSeed;
using task::MakeProblems;
using task::Problem;

// The response must be exactly answer_ids followed by eos_id.
bool IsCorrectIds(const std::vector<int64_t>& response_ids, const std::vector<int64_t>& answer_ids,
                  int64_t eos_id);

}  // namespace rl::train
