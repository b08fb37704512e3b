// A second demo task, for models that read English (the Hugging Face demo): short templated
// arithmetic word problems with whole-number answers, scored by the math verifier.
//   "Tom has 12 apples and buys 7 more. How many apples does Tom have now?" -> "19"
// Six templates, drawn uniformly: add, subtract, multiply, divide (exactly), and two two-step
// ones (add then subtract, multiply then add). Every number is a whole number from 1 to 144.
// A limit on the numbers (max_number, at least kWordsLeastMaxNumber) makes the task easier: only
// the problems whose every number, results included, is at most the limit are kept (drawn as
// without a limit, the others skipped). Few distinct problems are left, and since the split below
// is by numbers, a held-out problem under a limit asks an arithmetic fact never trained on.
// Every problem has a worked solution ("12 + 7 = 19."), which an SFT response ends with
// "#### 19" (GSM8K style) or "The answer is \boxed{19}." after.
//
// Determinism: a problem set is a function of (count, seed) alone: std::mt19937_64 (whose
// output the C++ standard fixes) seeded with `seed`, values taken as gen() % range, so the same
// seed gives the same problems on every platform.
// Split: a problem's key is its template and numbers ("add 12 7"; names and objects do not
// count). A key is held out when FNV-1a-64(key) % 10 == 0 (about 1 in 10 of the keys). Training
// problems never have a held-out key; the held-out set only has held-out keys and is one fixed
// sequence drawn with kWordsHeldOutSeed, whose first N problems are the set of size N. So a
// held-out problem is never trained on, even with other names in it.
// The other split (WordSplit::kCast) also holds out casts: the name of the problem's subject and
// its objects ("Tom apples"), by the same hash (14 of the 144 pairs). Its training problems have
// neither a held-out key nor a held-out cast; its held-out problems have a held-out cast and a
// key of training: the templates and numbers of training (arithmetic facts trained on) told of
// a subject and objects never seen together in training. New problems, as a benchmark's test
// split is to its training split, not new facts; and the split by numbers' held-out set stays
// unseen by its training too.
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::task {

constexpr uint64_t kWordsHeldOutSeed = 0x0dd5eed5;
// The smallest limit on the numbers every template can meet (a subtraction starts at 10).
constexpr int64_t kWordsLeastMaxNumber = 10;

struct WordProblem {
  std::string prompt;    // the question
  std::string answer;    // "19"
  std::string solution;  // "12 + 7 = 19."
  std::string key;       // "add 12 7": what the split by numbers is decided on
  std::string cast = {};  // "Tom apples": what the split by cast is decided on (set by the drawer)
};

enum class WordSplit { kNumbers, kCast };
// "numbers" or "cast"; InvalidArgument otherwise.
Result<WordSplit> ParseWordSplit(const std::string& name);

enum class ResponseFormat { kNone, kGsm8k, kBoxed };

// "none", "gsm8k" or "boxed"; InvalidArgument otherwise.
Result<ResponseFormat> ParseResponseFormat(const std::string& name);

bool IsHeldOutKey(const std::string& key);
// The largest number in a problem: its operands, intermediate results and answer.
int64_t LargestNumber(const WordProblem& p);
// `count` problems drawn with `seed` from the held-out keys (held_out) or from the others, every
// number at most max_number (0: no limit; else at least kWordsLeastMaxNumber, or InvalidArgument).
Result<std::vector<WordProblem>> DrawWordProblems(size_t count, uint64_t seed, bool held_out, int64_t max_number = 0,
                                                  WordSplit split = WordSplit::kNumbers);
// The fixed held-out set: the first `count` held-out problems drawn with kWordsHeldOutSeed (of
// those within max_number).
Result<std::vector<WordProblem>> WordProblemsHeldOut(size_t count, int64_t max_number = 0,
                                                     WordSplit split = WordSplit::kNumbers);
// The SFT response: "12 + 7 = 19.\n#### 19" (kGsm8k) or "12 + 7 = 19. The answer is
// \boxed{19}." (kBoxed); the bare answer for kNone.
std::string WordProblemResponse(const WordProblem& p, ResponseFormat format);

}  // namespace rl::task
