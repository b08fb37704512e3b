#include "rl/task/multiply.h"

#include <random>

namespace rl::task {

bool IsMultiplyHeldOut(int a, int b) {
  // splitmix64 of the pair, as for addition: a split that does not depend on any seed.
  uint64_t z = static_cast<uint64_t>(a) * 100 + static_cast<uint64_t>(b) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z % 10 == 0;
}

std::vector<Problem> DrawMultiplyProblems(size_t count, uint64_t seed, bool held_out) {
  std::mt19937_64 gen(seed);
  std::vector<Problem> out;
  out.reserve(count);
  while (out.size() < count) {
    int a = 10 + static_cast<int>(gen() % 90), b = 10 + static_cast<int>(gen() % 90);
    if (IsMultiplyHeldOut(a, b) != held_out) continue;
    out.push_back({std::to_string(a) + "*" + std::to_string(b) + "=", std::to_string(a * b)});
  }
  return out;
}

std::string MultiplyToolResponse(const Problem& p) {
  const std::string expr = p.prompt.substr(0, p.prompt.size() - 1);  // without "="
  return "<call>" + expr + "</call><result>" + p.answer + "</result>" + p.answer;
}

}  // namespace rl::task
