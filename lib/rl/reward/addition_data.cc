#include "rl/reward/addition_data.h"

#include <cstdio>
#include <random>

namespace rl::reward {

bool IsHeldOut(int a, int b) {
  // splitmix64 of the pair: a fixed split that does not depend on any seed.
  uint64_t z = static_cast<uint64_t>(a) * 1000 + static_cast<uint64_t>(b) + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return z % 50 == 0;
}

std::string AdditionPrompt(int a, int b) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%03d+%03d=", a, b);
  return buf;
}

std::string AdditionAnswer(int sum) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04d", sum);
  return buf;
}

std::vector<AdditionExample> MakeAdditionData(uint64_t count, uint64_t seed, bool heldout) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> digit3(0, 999);
  std::vector<AdditionExample> out;
  out.reserve(count);
  while (out.size() < count) {
    int a = digit3(rng), b = digit3(rng);
    if (IsHeldOut(a, b) != heldout) continue;
    out.push_back({AdditionPrompt(a, b), AdditionAnswer(a + b)});
  }
  return out;
}

}  // namespace rl::reward
