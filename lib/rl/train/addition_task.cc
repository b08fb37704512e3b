#include "rl/train/addition_task.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace rl::train {

std::vector<Problem> MakeProblems(size_t count, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<Problem> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    int a = static_cast<int>(gen() % 1000), b = static_cast<int>(gen() % 1000);
    char prompt[16];
    std::snprintf(prompt, sizeof prompt, "%03d+%03d=", a, b);
    out.push_back({prompt, std::to_string(a + b)});
  }
  return out;
}

std::vector<Problem> HeldOutSet(size_t count) { return MakeProblems(count, kHeldOutSeed); }

bool IsCorrect(const std::string& response, const std::string& answer) { return response == answer; }

bool IsCorrectIds(const std::vector<int64_t>& response_ids, const std::vector<int64_t>& answer_ids,
                  int64_t eos_id) {
  if (response_ids.size() != answer_ids.size() + 1 || response_ids.back() != eos_id) return false;
  return std::equal(answer_ids.begin(), answer_ids.end(), response_ids.begin());
}

}  // namespace rl::train
