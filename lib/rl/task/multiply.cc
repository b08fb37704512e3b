#include "rl/task/multiply.h"

#include <random>

namespace rl::task {

bool IsMultiplyHeldOut(int a, int b) {
  return SplitHash(static_cast<uint64_t>(a) * 100 + static_cast<uint64_t>(b)) % 10 == 0;
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

std::vector<Problem> DrawChainProblems(size_t count, uint64_t seed, bool held_out) {
  std::mt19937_64 gen(seed);
  std::vector<Problem> out;
  out.reserve(count);
  while (out.size() < count) {
    int v[4];
    for (int& x : v) x = 10 + static_cast<int>(gen() % 90);
    if (IsMultiplyHeldOut(v[0], v[1]) != held_out || IsMultiplyHeldOut(v[2], v[3]) != held_out) continue;
    out.push_back({std::to_string(v[0]) + "*" + std::to_string(v[1]) + "+" + std::to_string(v[2]) + "*" +
                       std::to_string(v[3]) + "=",
                   std::to_string(v[0] * v[1] + v[2] * v[3])});
  }
  return out;
}

std::string ChainToolResponse(const Problem& p) {
  const std::string expr = p.prompt.substr(0, p.prompt.size() - 1);
  const size_t plus = expr.find('+');
  auto product = [](const std::string& e) {
    const size_t star = e.find('*');
    return std::to_string(std::stoi(e.substr(0, star)) * std::stoi(e.substr(star + 1)));
  };
  const std::string x = product(expr.substr(0, plus)), y = product(expr.substr(plus + 1));
  auto call = [](const std::string& e, const std::string& r) { return "<call>" + e + "</call><result>" + r + "</result>"; };
  return call(expr.substr(0, plus), x) + call(expr.substr(plus + 1), y) + call(x + "+" + y, p.answer) + p.answer;
}

}  // namespace rl::task
