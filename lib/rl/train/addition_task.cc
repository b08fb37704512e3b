#include "rl/train/addition_task.h"

#include <algorithm>

namespace rl::train {

bool IsCorrectIds(const std::vector<int64_t>& response_ids, const std::vector<int64_t>& answer_ids,
                  int64_t eos_id) {
  if (response_ids.size() != answer_ids.size() + 1 || response_ids.back() != eos_id) return false;
  return std::equal(answer_ids.begin(), answer_ids.end(), response_ids.begin());
}

}  // namespace rl::train
