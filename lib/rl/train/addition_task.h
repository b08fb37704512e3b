// The demo task: 3-digit addition. "037+480=" -> "517", then <eos>.
//
// Operands are drawn uniformly from 0..999 and written with three digits; the answer is the sum in
// plain decimal (no leading zeros: "005+003=" -> "8"). A problem set is a function of its seed, so
// the held-out set is the same in every process (HeldOutSet). The checker is exact match: the
// response must be the answer followed by <eos>, nothing else. rl-reward carries its own copy of
// this one-line rule (a deliberate duplication: the two roles share no library).
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rl::train {

struct Problem {
  std::string prompt;  // "037+480="
  std::string answer;  // "517"
};

constexpr uint64_t kHeldOutSeed = 0x5eed0ffe1d;

// `count` problems drawn from a generator seeded with `seed`.
std::vector<Problem> MakeProblems(size_t count, uint64_t seed);
// The fixed held-out set: MakeProblems(count, kHeldOutSeed).
std::vector<Problem> HeldOutSet(size_t count);

// Exact match of a decoded response (special tokens already removed) with the answer.
bool IsCorrect(const std::string& response, const std::string& answer);
// The same on token ids: the response must be exactly answer_ids followed by eos_id.
bool IsCorrectIds(const std::vector<int64_t>& response_ids, const std::vector<int64_t>& answer_ids,
                  int64_t eos_id);

}  // namespace rl::train
