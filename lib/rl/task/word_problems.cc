#include "rl/task/word_problems.h"

#include <algorithm>
#include <random>

namespace rl::task {
namespace {

const char* const kNames[] = {"Tom", "Ana", "Sam", "Lily", "Omar", "Mia", "Ben", "Zoe", "Ravi", "Emma", "Leo", "Nora"};
const char* const kItems[] = {"apples", "pencils", "marbles", "stickers", "cookies", "books",
                              "cards",  "shells",  "stamps",  "balloons", "coins",   "eggs"};

template <size_t N>
const char* Pick(std::mt19937_64& gen, const char* const (&list)[N]) {
  return list[gen() % N];
}

// A whole number in [lo, hi].
int64_t Draw(std::mt19937_64& gen, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(gen() % static_cast<uint64_t>(hi - lo + 1));
}

std::string S(int64_t v) { return std::to_string(v); }

// Who and what a problem is about: names and objects do not change its key.
struct Cast {
  std::string name, other, item;
};

WordProblem Add(std::mt19937_64& gen, const Cast& c) {
  int64_t a = Draw(gen, 2, 50), b = Draw(gen, 2, 50);
  return {c.name + " has " + S(a) + " " + c.item + " and buys " + S(b) + " more. How many " + c.item + " does " +
              c.name + " have now?",
          S(a + b), S(a) + " + " + S(b) + " = " + S(a + b) + ".", "add " + S(a) + " " + S(b)};
}

WordProblem Subtract(std::mt19937_64& gen, const Cast& c) {
  int64_t a = Draw(gen, 10, 60);
  int64_t b = Draw(gen, 1, a - 1);
  return {c.name + " had " + S(a) + " " + c.item + " and gave " + S(b) + " of them to " + c.other + ". How many " +
              c.item + " does " + c.name + " have left?",
          S(a - b), S(a) + " - " + S(b) + " = " + S(a - b) + ".", "sub " + S(a) + " " + S(b)};
}

WordProblem Multiply(std::mt19937_64& gen, const Cast& c) {
  int64_t a = Draw(gen, 2, 12), b = Draw(gen, 2, 12);
  return {c.name + " buys " + S(a) + " bags of " + c.item + ". Each bag has " + S(b) + " " + c.item + ". How many " +
              c.item + " does " + c.name + " buy in all?",
          S(a * b), S(a) + " * " + S(b) + " = " + S(a * b) + ".", "mul " + S(a) + " " + S(b)};
}

WordProblem Divide(std::mt19937_64& gen, const Cast& c) {  // exactly: the total is drawn as a product
  int64_t a = Draw(gen, 2, 12), b = Draw(gen, 2, 9);
  return {c.name + " shares " + S(a * b) + " " + c.item + " equally among " + S(b) + " friends. How many " + c.item +
              " does each friend get?",
          S(a), S(a * b) + " / " + S(b) + " = " + S(a) + ".", "div " + S(a * b) + " " + S(b)};
}

WordProblem AddSubtract(std::mt19937_64& gen, const Cast& c) {
  int64_t a = Draw(gen, 5, 40), b = Draw(gen, 2, 30);
  int64_t d = Draw(gen, 1, a + b - 1);
  return {c.name + " has " + S(a) + " " + c.item + ", buys " + S(b) + " more and then gives " + S(d) + " to " +
              c.other + ". How many " + c.item + " does " + c.name + " have now?",
          S(a + b - d), S(a) + " + " + S(b) + " = " + S(a + b) + ". " + S(a + b) + " - " + S(d) + " = " + S(a + b - d) + ".",
          "addsub " + S(a) + " " + S(b) + " " + S(d)};
}

WordProblem MultiplyAdd(std::mt19937_64& gen, const Cast& c) {
  int64_t a = Draw(gen, 2, 9), b = Draw(gen, 2, 12);
  int64_t d = Draw(gen, 1, 30);
  return {c.name + " has " + S(d) + " " + c.item + ". Then " + c.name + " buys " + S(a) + " packs with " + S(b) + " " +
              c.item + " in each pack. How many " + c.item + " does " + c.name + " have now?",
          S(a * b + d), S(a) + " * " + S(b) + " = " + S(a * b) + ". " + S(a * b) + " + " + S(d) + " = " + S(a * b + d) + ".",
          "muladd " + S(a) + " " + S(b) + " " + S(d)};
}

using Template = WordProblem (*)(std::mt19937_64&, const Cast&);
const Template kTemplates[] = {Add, Subtract, Multiply, Divide, AddSubtract, MultiplyAdd};

// One problem of template t with fresh names, objects and numbers, drawn in that order.
WordProblem Make(size_t t, std::mt19937_64& gen) {
  Cast c;
  c.name = Pick(gen, kNames);
  c.other = Pick(gen, kNames);
  c.item = Pick(gen, kItems);
  if (c.other == c.name) c.other = c.name == "Tom" ? "Ana" : "Tom";
  WordProblem p = kTemplates[t](gen, c);
  p.cast = c.name + " " + c.item;
  return p;
}

}  // namespace

Result<ResponseFormat> ParseResponseFormat(const std::string& name) {
  if (name == "none") return ResponseFormat::kNone;
  if (name == "gsm8k") return ResponseFormat::kGsm8k;
  if (name == "boxed") return ResponseFormat::kBoxed;
  return Status::InvalidArgument("unknown response format '" + name + "' (none, gsm8k or boxed)");
}

Result<WordSplit> ParseWordSplit(const std::string& name) {
  if (name == "numbers") return WordSplit::kNumbers;
  if (name == "cast") return WordSplit::kCast;
  return Status::InvalidArgument("unknown split '" + name + "' (numbers or cast)");
}

bool IsHeldOutKey(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ULL;
  return h % 10 == 0;
}

int64_t LargestNumber(const WordProblem& p) {
  // The solution states every number of the problem: "a * b = c. c + d = e."
  int64_t largest = 0, current = 0;
  for (char ch : p.solution + " ") {
    if (ch >= '0' && ch <= '9') {
      current = current * 10 + (ch - '0');
    } else {
      largest = std::max(largest, current);
      current = 0;
    }
  }
  return largest;
}

Result<std::vector<WordProblem>> DrawWordProblems(size_t count, uint64_t seed, bool held_out, int64_t max_number,
                                                  WordSplit split) {
  if (max_number != 0 && max_number < kWordsLeastMaxNumber) {
    return Status::InvalidArgument("the largest number of word problems must be 0 (no limit) or at least " +
                                   std::to_string(kWordsLeastMaxNumber) + ", not " + std::to_string(max_number));
  }
  std::mt19937_64 gen(seed);
  std::vector<WordProblem> out;
  out.reserve(count);
  while (out.size() < count) {
    WordProblem p = Make(gen() % (sizeof kTemplates / sizeof kTemplates[0]), gen);
    // Under the split by cast, training leaves out both the held-out numbers and the held-out
    // casts, so the held-out sets of both splits stay unseen.
    bool numbers_out = IsHeldOutKey(p.key), cast_out = split == WordSplit::kCast && IsHeldOutKey(p.cast);
    bool keep = held_out ? (split == WordSplit::kCast ? cast_out && !numbers_out : numbers_out)
                         : !numbers_out && !cast_out;
    if (!keep) continue;
    if (max_number != 0 && LargestNumber(p) > max_number) continue;
    out.push_back(std::move(p));
  }
  return out;
}

Result<std::vector<WordProblem>> WordProblemsHeldOut(size_t count, int64_t max_number, WordSplit split) {
  return DrawWordProblems(count, kWordsHeldOutSeed, true, max_number, split);
}

std::string WordProblemResponse(const WordProblem& p, ResponseFormat format) {
  switch (format) {
    case ResponseFormat::kGsm8k: return p.solution + "\n#### " + p.answer;
    case ResponseFormat::kBoxed: return p.solution + " The answer is \\boxed{" + p.answer + "}.";
    case ResponseFormat::kNone: break;
  }
  return p.answer;
}

}  // namespace rl::task
