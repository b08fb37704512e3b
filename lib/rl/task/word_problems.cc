#include "rl/task/word_problems.h"

#include <random>

namespace rl::task {
namespace {

const char* const kNames[] = {"Tom", "Ana", "Sam", "Lily", "Omar", "Mia", "Ben", "Zoe", "Ravi", "Emma", "Leo", "Nora"};
const char* const kItems[] = {"apples", "pencils", "marbles", "stickers", "cookies", "books",
                              "cards",  "shells",  "stamps",  "balloons", "coins",   "eggs"};
constexpr int kTemplates = 6;

template <size_t N>
const char* Pick(std::mt19937_64& gen, const char* const (&list)[N]) {
  return list[gen() % N];
}

// A whole number in [lo, hi].
int64_t Draw(std::mt19937_64& gen, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(gen() % static_cast<uint64_t>(hi - lo + 1));
}

std::string S(int64_t v) { return std::to_string(v); }

// One problem of template t with fresh numbers, names and objects.
WordProblem Make(int t, std::mt19937_64& gen) {
  std::string name = Pick(gen, kNames), friend_name = Pick(gen, kNames), item = Pick(gen, kItems);
  if (friend_name == name) friend_name = name == "Tom" ? "Ana" : "Tom";
  WordProblem p;
  int64_t a, b, c;
  switch (t) {
    case 0:  // add
      a = Draw(gen, 2, 50), b = Draw(gen, 2, 50);
      p.prompt = name + " has " + S(a) + " " + item + " and buys " + S(b) + " more. How many " + item + " does " +
                 name + " have now?";
      p.solution = S(a) + " + " + S(b) + " = " + S(a + b) + ".";
      p.answer = S(a + b), p.key = "add " + S(a) + " " + S(b);
      break;
    case 1:  // subtract
      a = Draw(gen, 10, 60), b = Draw(gen, 1, a - 1);
      p.prompt = name + " had " + S(a) + " " + item + " and gave " + S(b) + " of them to " + friend_name +
                 ". How many " + item + " does " + name + " have left?";
      p.solution = S(a) + " - " + S(b) + " = " + S(a - b) + ".";
      p.answer = S(a - b), p.key = "sub " + S(a) + " " + S(b);
      break;
    case 2:  // multiply
      a = Draw(gen, 2, 12), b = Draw(gen, 2, 12);
      p.prompt = name + " buys " + S(a) + " bags of " + item + ". Each bag has " + S(b) + " " + item +
                 ". How many " + item + " does " + name + " buy in all?";
      p.solution = S(a) + " * " + S(b) + " = " + S(a * b) + ".";
      p.answer = S(a * b), p.key = "mul " + S(a) + " " + S(b);
      break;
    case 3:  // divide, exactly
      a = Draw(gen, 2, 12), b = Draw(gen, 2, 9);
      p.prompt = name + " shares " + S(a * b) + " " + item + " equally among " + S(b) +
                 " friends. How many " + item + " does each friend get?";
      p.solution = S(a * b) + " / " + S(b) + " = " + S(a) + ".";
      p.answer = S(a), p.key = "div " + S(a * b) + " " + S(b);
      break;
    case 4:  // add, then subtract
      a = Draw(gen, 5, 40), b = Draw(gen, 2, 30), c = Draw(gen, 1, a + b - 1);
      p.prompt = name + " has " + S(a) + " " + item + ", buys " + S(b) + " more and then gives " + S(c) + " to " +
                 friend_name + ". How many " + item + " does " + name + " have now?";
      p.solution = S(a) + " + " + S(b) + " = " + S(a + b) + ". " + S(a + b) + " - " + S(c) + " = " + S(a + b - c) + ".";
      p.answer = S(a + b - c), p.key = "addsub " + S(a) + " " + S(b) + " " + S(c);
      break;
    default:  // multiply, then add
      a = Draw(gen, 2, 9), b = Draw(gen, 2, 12), c = Draw(gen, 1, 30);
      p.prompt = name + " has " + S(c) + " " + item + ". Then " + name + " buys " + S(a) + " packs with " + S(b) +
                 " " + item + " in each pack. How many " + item + " does " + name + " have now?";
      p.solution = S(a) + " * " + S(b) + " = " + S(a * b) + ". " + S(a * b) + " + " + S(c) + " = " + S(a * b + c) + ".";
      p.answer = S(a * b + c), p.key = "muladd " + S(a) + " " + S(b) + " " + S(c);
      break;
  }
  return p;
}

}  // namespace

Result<ResponseFormat> ParseResponseFormat(const std::string& name) {
  if (name == "none") return ResponseFormat::kNone;
  if (name == "gsm8k") return ResponseFormat::kGsm8k;
  if (name == "boxed") return ResponseFormat::kBoxed;
  return Status::InvalidArgument("unknown response format '" + name + "' (none, gsm8k or boxed)");
}

bool IsHeldOutKey(const std::string& key) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, 64 bits
  for (unsigned char c : key) h = (h ^ c) * 0x100000001b3ULL;
  return h % 10 == 0;
}

std::vector<WordProblem> DrawWordProblems(size_t count, uint64_t seed, bool held_out) {
  std::mt19937_64 gen(seed);
  std::vector<WordProblem> out;
  out.reserve(count);
  while (out.size() < count) {
    WordProblem p = Make(static_cast<int>(gen() % kTemplates), gen);
    if (IsHeldOutKey(p.key) == held_out) out.push_back(std::move(p));
  }
  return out;
}

std::vector<WordProblem> WordProblemsHeldOut(size_t count) { return DrawWordProblems(count, kWordsHeldOutSeed, true); }

std::string WordProblemResponse(const WordProblem& p, ResponseFormat format) {
  switch (format) {
    case ResponseFormat::kGsm8k: return p.solution + "\n#### " + p.answer;
    case ResponseFormat::kBoxed: return p.solution + " The answer is \\boxed{" + p.answer + "}.";
    case ResponseFormat::kNone: break;
  }
  return p.answer;
}

}  // namespace rl::task
