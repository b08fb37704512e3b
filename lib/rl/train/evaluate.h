// Held-out evaluation: greedy exact-match accuracy of a model on addition problems.
// Thread safety: uses the model read-only; do not change its weights during the call.
#pragma once

#include <vector>

#include "rl/core/status.h"
#include "rl/model/transformer.h"
#include "rl/train/addition_task.h"

namespace rl::train {

// The fraction of problems whose greedy response is exactly the answer followed by <eos>.
Result<double> GreedyAccuracy(const model::Transformer& model, const std::vector<Problem>& problems);

}  // namespace rl::train
