// The demo task: 3-digit addition with zero padding, "037+480=" -> "0517".
//
// The 10^6 ordered pairs (a, b) are split once and for all by a hash of the pair: about 1 in 50
// is held out. Training prompts (MakeAdditionData) never come from the held-out part; the
// held-out set (heldout = true) draws only from it, so with a fixed seed it is a fixed set that
// no training run has seen. The answer is the sum written with four digits ("0005", "1998"): see
// lib/rl/train/addition_task.h for why, and for rl-train's copy of this rule, which must agree.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace rl::reward {

struct AdditionExample {
  std::string prompt;  // "037+480="
  std::string answer;  // "0517"
};

bool IsHeldOut(int a, int b);
std::string AdditionPrompt(int a, int b);
std::string AdditionAnswer(int sum);

// `count` examples drawn with replacement from the training or the held-out part.
std::vector<AdditionExample> MakeAdditionData(uint64_t count, uint64_t seed, bool heldout);

}  // namespace rl::reward
