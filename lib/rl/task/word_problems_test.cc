#include "rl/task/word_problems.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "rl/task/math_answer.h"

namespace rl::task {
namespace {

// Checks a solution independently of the generator: each "x op y = z." is true arithmetic and
// the last z is the answer; the numbers of the first step are in the prompt.
void ExpectSolutionAddsUp(const WordProblem& p) {
  std::istringstream steps(p.solution);
  std::string step;
  long last = -1;
  bool first = true;
  while (std::getline(steps, step, '.')) {
    long x, y, z;
    char op;
    if (std::sscanf(step.c_str(), " %ld %c %ld = %ld", &x, &op, &y, &z) != 4) continue;
    long want = op == '+' ? x + y : op == '-' ? x - y : op == '*' ? x * y : (y != 0 && x % y == 0 ? x / y : -999);
    EXPECT_EQ(z, want) << p.solution;
    EXPECT_GT(z, 0) << p.solution;
    if (first) {
      EXPECT_NE(p.prompt.find(" " + std::to_string(x) + " "), std::string::npos) << p.prompt;
      EXPECT_NE(p.prompt.find(" " + std::to_string(y) + " "), std::string::npos) << p.prompt;
    }
    first = false;
    last = z;
  }
  EXPECT_EQ(std::to_string(last), p.answer) << p.solution;
}

TEST(WordProblemsTest, AnswersFollowFromTheSolutionsOfEveryTemplate) {
  std::map<std::string, int> templates;
  for (const WordProblem& p : DrawWordProblems(3000, 1, false)) {
    ExpectSolutionAddsUp(p);
    templates[p.key.substr(0, p.key.find(' '))]++;
  }
  for (const WordProblem& p : WordProblemsHeldOut(300)) ExpectSolutionAddsUp(p);
  EXPECT_EQ(templates.size(), 6u);
  for (auto& [name, n] : templates) EXPECT_GT(n, 300) << name;  // about 500 each
}

TEST(WordProblemsTest, TheSameSeedGivesTheSameProblems) {
  auto a = DrawWordProblems(200, 7, false), b = DrawWordProblems(200, 7, false), c = DrawWordProblems(200, 8, false);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].prompt, b[i].prompt);
  size_t same = 0;
  for (size_t i = 0; i < a.size(); ++i) same += a[i].prompt == c[i].prompt;
  EXPECT_LT(same, 5u);
  // Pinned: std::mt19937_64's output is fixed by the standard, so this holds on every platform;
  // a change of the templates or of the drawing order shows here.
  EXPECT_EQ(a[0].prompt, "Ben shares 42 cards equally among 6 friends. How many cards does each friend get?");
  EXPECT_EQ(a[1].key, "div 30 3");
}

TEST(WordProblemsTest, HeldOutKeysAreNeverTrainedOnAndTheSetIsFixedAndNested) {
  std::set<std::string> held;
  auto small = WordProblemsHeldOut(100), big = WordProblemsHeldOut(1000);
  for (size_t i = 0; i < small.size(); ++i) EXPECT_EQ(small[i].prompt, big[i].prompt);
  for (const WordProblem& p : big) {
    EXPECT_TRUE(IsHeldOutKey(p.key));
    held.insert(p.key);
  }
  size_t keys = 0, held_keys = 0;
  for (uint64_t seed : {1, 2, 3}) {
    for (const WordProblem& p : DrawWordProblems(5000, seed, false)) {
      EXPECT_EQ(held.count(p.key), 0u) << p.key;
      EXPECT_FALSE(IsHeldOutKey(p.key));
    }
  }
  for (int a = 2; a <= 50; ++a) {
    for (int b = 2; b <= 50; ++b, ++keys) held_keys += IsHeldOutKey("add " + std::to_string(a) + " " + std::to_string(b));
  }
  EXPECT_NEAR(static_cast<double>(held_keys) / keys, 0.1, 0.02);
}

TEST(WordProblemsTest, SftResponsesScoreOneWithTheMathVerifier) {
  for (const WordProblem& p : DrawWordProblems(200, 3, false)) {
    for (ResponseFormat f : {ResponseFormat::kGsm8k, ResponseFormat::kBoxed, ResponseFormat::kNone}) {
      std::string r = WordProblemResponse(p, f);
      EXPECT_EQ(*MathReward(r, p.answer), 1.0) << r;
      EXPECT_EQ(*MathReward(r, std::to_string(std::stol(p.answer) + 1)), 0.0) << r;
    }
  }
  WordProblem p{"q", "19", "12 + 7 = 19.", "add 12 7"};
  EXPECT_EQ(WordProblemResponse(p, ResponseFormat::kGsm8k), "12 + 7 = 19.\n#### 19");
  EXPECT_EQ(WordProblemResponse(p, ResponseFormat::kBoxed), "12 + 7 = 19. The answer is \\boxed{19}.");
  EXPECT_EQ(ParseResponseFormat("latex").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rl::task
