#include "rl/task/addition.h"

#include <cstdio>
#include <random>

namespace rl::task {

uint64_t SplitHash(uint64_t key) {
  uint64_t z = key + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool IsHeldOut(int a, int b) { return SplitHash(static_cast<uint64_t>(a) * 1000 + static_cast<uint64_t>(b)) % 50 == 0; }

std::string AdditionPrompt(int a, int b) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%03d+%03d=", a, b);
  return buf;
}

std::string AdditionAnswer(int sum) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d", sum);
  return buf;
}

std::vector<Problem> DrawProblems(size_t count, uint64_t seed, bool held_out) {
  std::mt19937_64 gen(seed);
  std::vector<Problem> out;
  out.reserve(count);
  while (out.size() < count) {
    int a = static_cast<int>(gen() % 1000), b = static_cast<int>(gen() % 1000);
    if (IsHeldOut(a, b) != held_out) continue;
    out.push_back({AdditionPrompt(a, b), AdditionAnswer(a + b)});
  }
  return out;
}

std::vector<Problem> MakeProblems(size_t count, uint64_t seed) { return DrawProblems(count, seed, false); }

std::vector<Problem> HeldOutSet(size_t count) { return DrawProblems(count, kHeldOutSeed, true); }

bool IsCorrect(const std::string& response, const std::string& answer) { return response == answer; }

}  // namespace rl::task
