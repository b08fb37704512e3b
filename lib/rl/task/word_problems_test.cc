#include "rl/task/word_problems.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "rl/task/math_answer.h"

namespace rl::task {
namespace {

std::vector<WordProblem> Draw(size_t count, uint64_t seed, bool held_out = false, int64_t max_number = 0) {
  auto r = DrawWordProblems(count, seed, held_out, max_number);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : std::vector<WordProblem>{};
}

std::vector<WordProblem> HeldOut(size_t count, int64_t max_number = 0) {
  return Draw(count, kWordsHeldOutSeed, true, max_number);
}

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
  for (const WordProblem& p : Draw(3000, 1)) {
    ExpectSolutionAddsUp(p);
    templates[p.key.substr(0, p.key.find(' '))]++;
  }
  for (const WordProblem& p : HeldOut(300)) ExpectSolutionAddsUp(p);
  EXPECT_EQ(templates.size(), 6u);
  for (auto& [name, n] : templates) EXPECT_GT(n, 300) << name;  // about 500 each
}

TEST(WordProblemsTest, TheSameSeedGivesTheSameProblems) {
  auto a = Draw(200, 7), b = Draw(200, 7), c = Draw(200, 8);
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
  auto small = HeldOut(100), big = HeldOut(1000);
  for (size_t i = 0; i < small.size(); ++i) EXPECT_EQ(small[i].prompt, big[i].prompt);
  for (const WordProblem& p : big) {
    EXPECT_TRUE(IsHeldOutKey(p.key));
    held.insert(p.key);
  }
  size_t keys = 0, held_keys = 0;
  for (uint64_t seed : {1, 2, 3}) {
    for (const WordProblem& p : Draw(5000, seed)) {
      EXPECT_EQ(held.count(p.key), 0u) << p.key;
      EXPECT_FALSE(IsHeldOutKey(p.key));
    }
  }
  for (int a = 2; a <= 50; ++a) {
    for (int b = 2; b <= 50; ++b, ++keys) held_keys += IsHeldOutKey("add " + std::to_string(a) + " " + std::to_string(b));
  }
  EXPECT_NEAR(static_cast<double>(held_keys) / keys, 0.1, 0.02);
}

TEST(WordProblemsTest, MaxNumberKeepsOnlyProblemsWithinItAndEveryTemplate) {
  std::map<std::string, int> templates;
  std::vector<WordProblem> small = Draw(3000, 1, false, 20);
  ASSERT_EQ(small.size(), 3000u);
  for (const WordProblem& p : small) {
    ExpectSolutionAddsUp(p);
    // Independently of LargestNumber: every number written in the prompt and the answer.
    for (const std::string& text : {p.prompt, p.answer}) {
      for (size_t i = 0; i < text.size();) {
        if (!isdigit(static_cast<unsigned char>(text[i]))) { ++i; continue; }
        size_t j = i;
        while (j < text.size() && isdigit(static_cast<unsigned char>(text[j]))) ++j;
        EXPECT_LE(std::stol(text.substr(i, j - i)), 20) << text;
        i = j;
      }
    }
    EXPECT_LE(LargestNumber(p), 20) << p.solution;
    templates[p.key.substr(0, p.key.find(' '))]++;
  }
  EXPECT_EQ(templates.size(), 6u);  // every template can meet the limit
  // The held-out split and its nesting hold under a limit too.
  auto held = HeldOut(200, 20), held_more = HeldOut(400, 20);
  for (size_t i = 0; i < held.size(); ++i) {
    EXPECT_EQ(held[i].prompt, held_more[i].prompt);
    EXPECT_TRUE(IsHeldOutKey(held[i].key));
    EXPECT_LE(LargestNumber(held[i]), 20);
  }
  // The intermediate result counts: 9 * 8 = 72 is over 20 even when 72 + 3 is the question.
  EXPECT_EQ(LargestNumber({"q", "75", "9 * 8 = 72. 72 + 3 = 75.", "muladd 9 8 3"}), 75);
  EXPECT_EQ(DrawWordProblems(5, 1, false, 9).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Draw(5, 1, false, kWordsLeastMaxNumber).size(), 5u);
}

TEST(WordProblemsTest, SftResponsesScoreOneWithTheMathVerifier) {
  for (const WordProblem& p : Draw(200, 3)) {
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

// The split by cast: held-out problems are about (subject, objects) pairs training never has,
// read off the prompt independently of the cast field (the prompt starts with the subject's name
// and names its objects), while their templates and number keys are those of training.
TEST(WordProblemsTest, TheSplitByCastHoldsOutPairsOfSubjectAndObjectsNotNumbers) {
  auto cast_of = [](const WordProblem& p) {
    std::string name = p.prompt.substr(0, p.prompt.find(' '));
    for (const char* item : {"apples", "pencils", "marbles", "stickers", "cookies", "books", "cards", "shells",
                             "stamps", "balloons", "coins", "eggs"}) {
      if (p.prompt.find(std::string(" ") + item) != std::string::npos) return name + " " + item;
    }
    return std::string("?");
  };
  auto train = DrawWordProblems(20000, 7, false, 20, WordSplit::kCast);
  auto held = WordProblemsHeldOut(500, 20, WordSplit::kCast);
  ASSERT_TRUE(train.ok() && held.ok());
  std::set<std::string> train_casts, train_keys, held_casts;
  std::map<std::string, int> held_templates, train_templates;
  for (const WordProblem& p : *train) {
    EXPECT_EQ(cast_of(p), p.cast) << p.prompt;
    EXPECT_FALSE(IsHeldOutKey(p.key)) << p.key;
    train_casts.insert(p.cast);
    train_keys.insert(p.key);
    train_templates[p.key.substr(0, p.key.find(' '))]++;
  }
  size_t keys_seen = 0;
  for (const WordProblem& p : *held) {
    EXPECT_EQ(cast_of(p), p.cast) << p.prompt;
    EXPECT_TRUE(IsHeldOutKey(p.cast));
    EXPECT_FALSE(IsHeldOutKey(p.key)) << p.key;
    EXPECT_EQ(train_casts.count(p.cast), 0u) << p.prompt;
    held_casts.insert(p.cast);
    keys_seen += train_keys.count(p.key);
    held_templates[p.key.substr(0, p.key.find(' '))]++;
  }
  EXPECT_EQ(train_casts.size() + held_casts.size(), 144u);
  EXPECT_GT(held_casts.size(), 5u);
  // Facts are shared: nearly every held-out problem's numbers come up in training (and those of
  // the split by numbers' held-out set never do, as checked above).
  EXPECT_GT(keys_seen, held->size() * 9 / 10);
  // The mix of templates stays: each within 10 points of its share in training.
  for (const auto& [t, n] : train_templates) {
    EXPECT_NEAR(double(held_templates[t]) / held->size(), double(n) / train->size(), 0.1) << t;
  }
  EXPECT_EQ(ParseWordSplit("names").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rl::task
