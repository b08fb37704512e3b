// The demo task, shared by rl-train (SFT data, prompts, held-out evaluation) and rl-reward
// (make-data): 3-digit addition, "037+480=" -> "0517", then <eos>.
//
// Operands are drawn uniformly from 0..999 and written with three digits; the answer is the sum
// written with four ("005+003=" -> "0008"). The fixed width matters to the model, not the checker:
// with learned absolute positions, an unpadded answer ("517" or "1517") puts the units digit of a
// 3-digit sum where a 4-digit sum has its tens, and a policy half-way through learning the task
// trades one length for the other. Measured: GRPO from a 30% SFT start fixed 3-digit sums (7% ->
// 77%) while breaking 4-digit ones (55% -> 10%) and stalled near 45%.
//
// The 10^6 pairs are split once by a hash of the pair; about 1 in 50 is held out. Training
// problems never come from the held-out part, and the held-out set only from it, so held-out
// accuracy is measured on sums no run has trained on. The held-out set is one fixed sequence
// (drawn with kHeldOutSeed): the first N problems of it are the set of size N, so a larger
// evaluation contains a smaller one.
// The checker is exact match: the response must be the answer followed by <eos>, nothing else.
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rl::task {

struct Problem {
  std::string prompt;  // "037+480="
  std::string answer;  // "0517"
};

constexpr uint64_t kHeldOutSeed = 0x5eed0ffe1d;

// splitmix64 of `key`: how the tasks split problems into training and held-out, whatever the seed.
uint64_t SplitHash(uint64_t key);
// True for the pairs held out of training (about 1 in 50, fixed).
bool IsHeldOut(int a, int b);
std::string AdditionPrompt(int a, int b);  // "037+480="
std::string AdditionAnswer(int sum);       // "0517"

// `count` problems drawn with replacement from the held-out pairs (held_out) or the others.
std::vector<Problem> DrawProblems(size_t count, uint64_t seed, bool held_out);
// `count` training problems (never held out) drawn from a generator seeded with `seed`.
std::vector<Problem> MakeProblems(size_t count, uint64_t seed);
// The fixed held-out set: the first `count` held-out problems drawn with kHeldOutSeed.
std::vector<Problem> HeldOutSet(size_t count);

// Exact match of a decoded response (special tokens already removed) with the answer.
bool IsCorrect(const std::string& response, const std::string& answer);

}  // namespace rl::task
