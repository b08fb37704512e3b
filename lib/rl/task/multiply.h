// The agent demo's task: 2-digit multiplication, "37*48=" -> "1776", which the demo's tiny model
// cannot learn to do in its head within the demo's budget but can do with a calculator: call it
// with the expression and copy its result ("tools" responses teach the call format in SFT).
//
// The 8100 pairs 10..99 x 10..99 are split once by a hash of the pair; about 1 in 10 is held
// out, so held-out accuracy is measured on products no run has trained on. The held-out set is
// one fixed sequence drawn with kHeldOutSeed (its first N problems are the set of size N).
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/task/addition.h"

namespace rl::task {

bool IsMultiplyHeldOut(int a, int b);
// `count` problems drawn with replacement from the held-out pairs (held_out) or the others.
std::vector<Problem> DrawMultiplyProblems(size_t count, uint64_t seed, bool held_out);
// The response that solves `p` with one call: "<call>37*48</call><result>1776</result>1776".
std::string MultiplyToolResponse(const Problem& p);

// The drill's longer conversations: "12*34+56*78=" -> "4776", solved with three calls (each
// product, then their sum): four turns. Drawn from the same split (both pairs on the same side).
std::vector<Problem> DrawChainProblems(size_t count, uint64_t seed, bool held_out);
std::string ChainToolResponse(const Problem& p);

}  // namespace rl::task
