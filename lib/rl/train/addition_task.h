// The demo task: 3-digit addition. "037+480=" -> "0517", then <eos>.
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
// accuracy is measured on sums no run has trained on. rl-reward carries its own copy of the split
// and of the format (a deliberate duplication: the two roles share no library); both must agree.
// The checker is exact match: the response must be the answer followed by <eos>, nothing else.
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rl::train {

struct Problem {
  std::string prompt;  // "037+480="
  std::string answer;  // "0517"
};

constexpr uint64_t kHeldOutSeed = 0x5eed0ffe1d;

// True for the pairs held out of training (about 1 in 50, fixed, the same rule as rl-reward's).
bool IsHeldOut(int a, int b);
// `count` training problems (never held out) drawn from a generator seeded with `seed`.
std::vector<Problem> MakeProblems(size_t count, uint64_t seed);
// The fixed held-out set: `count` held-out problems drawn with kHeldOutSeed.
std::vector<Problem> HeldOutSet(size_t count);

// Exact match of a decoded response (special tokens already removed) with the answer.
bool IsCorrect(const std::string& response, const std::string& answer);
// The same on token ids: the response must be exactly answer_ids followed by eos_id.
bool IsCorrectIds(const std::vector<int64_t>& response_ids, const std::vector<int64_t>& answer_ids,
                  int64_t eos_id);

}  // namespace rl::train
