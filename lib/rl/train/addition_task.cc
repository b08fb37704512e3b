#include "rl/train/addition_task.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace rl::train {

bool IsHeldOut(int a, int b) {
  // splitmix64 of the pair: a split that does not depend on any seed.
  uint64_t z = static_cast<uint64_t>(a) * 1000 + static_cast<uint64_t>(b) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z % 50 == 0;
}

namespace {

std::vector<Problem> Draw(size_t count, uint64_t seed, bool held_out) {
  std::mt19937_64 gen(seed);
  std::vector<Problem> out;
  out.reserve(count);
  while (out.size() < count) {
    int a = static_cast<int>(gen() % 1000), b = static_cast<int>(gen() % 1000);
    if (IsHeldOut(a, b) != held_out) continue;
    char prompt[16], answer[8];
    std::snprintf(prompt, sizeof prompt, "%03d+%03d=", a, b);
    std::snprintf(answer, sizeof answer, "%04d", a + b);
    out.push_back({prompt, answer});
  }
  return out;
}

}  // namespace

std::vector<Problem> MakeProblems(size_t count, uint64_t seed) { return Draw(count, seed, false); }

std::vector<Problem> HeldOutSet(size_t count) { return Draw(count, kHeldOutSeed, true); }

bool IsCorrect(const std::string& response, const std::string& answer) { return response == answer; }

bool IsCorrectIds(const std::vector<int64_t>& response_ids, const std::vector<int64_t>& answer_ids,
                  int64_t eos_id) {
  if (response_ids.size() != answer_ids.size() + 1 || response_ids.back() != eos_id) return false;
  return std::equal(answer_ids.begin(), answer_ids.end(), response_ids.begin());
}

}  // namespace rl::train
