#include "rl/reward/verifier.h"

#include <gtest/gtest.h>

#include <set>

#include "rl/task/addition.h"

namespace rl::reward {
namespace {

double ScoreOf(Verifier& v, const std::string& response, const std::string& answer) {
  auto r = v.Score({"p", response, answer});
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : -1;
}

TEST(AdditionVerifierTest, OnlyTheExactAnswerScores) {
  auto v = MakeAdditionVerifier();
  EXPECT_EQ(ScoreOf(*v, "517", "517"), 1.0);
  EXPECT_EQ(ScoreOf(*v, "0517", "517"), 0.0);
  EXPECT_EQ(ScoreOf(*v, "517 ", "517"), 0.0);
  EXPECT_EQ(ScoreOf(*v, "", "517"), 0.0);
  EXPECT_EQ(ScoreOf(*v, "51", "517"), 0.0);
}

TEST(FinalAnswerTest, TakesTheTextAfterTheLastMarkOrTheLastLine) {
  EXPECT_EQ(FinalAnswer("so 2+2 is 4\n#### 4\n"), "4");
  EXPECT_EQ(FinalAnswer("#### 3 then #### 5"), "5");
  EXPECT_EQ(FinalAnswer("work\n\n  42  \n\n"), "42");
  EXPECT_EQ(FinalAnswer("  7 "), "7");
  EXPECT_EQ(FinalAnswer(""), "");
}

TEST(ExactVerifierTest, ComparesTheFinalAnswerTrimmed) {
  auto v = MakeExactVerifier();
  EXPECT_EQ(ScoreOf(*v, "reasoning\n#### Paris", " Paris\n"), 1.0);
  EXPECT_EQ(ScoreOf(*v, "reasoning\n#### paris", "Paris"), 0.0);
  EXPECT_EQ(ScoreOf(*v, "Paris is it\nLyon", "Paris"), 0.0);
}

TEST(LastNumberTest, FindsSignsFractionsExponentsAndSeparators) {
  EXPECT_EQ(LastNumber("a 3 b 12"), 12.0);
  EXPECT_EQ(LastNumber("x = -4.5."), -4.5);
  EXPECT_EQ(LastNumber("1,234"), 1234.0);
  EXPECT_EQ(LastNumber("1e-3"), 1e-3);
  EXPECT_EQ(LastNumber("v2.50"), 2.5);
  EXPECT_FALSE(LastNumber("none").has_value());
}

TEST(NumericVerifierTest, AcceptsWithinToleranceOnly) {
  auto v = MakeNumericVerifier(0.01);
  EXPECT_EQ(ScoreOf(*v, "#### 3.14159", "3.14"), 1.0);
  EXPECT_EQ(ScoreOf(*v, "#### 3.2", "3.14"), 0.0);
  EXPECT_EQ(ScoreOf(*v, "the answer is 1,000", "1000"), 1.0);
  EXPECT_EQ(ScoreOf(*v, "no number here", "1000"), 0.0);
  auto exact = MakeNumericVerifier(0);
  EXPECT_EQ(ScoreOf(*exact, "-7", "-7"), 1.0);
}

TEST(NumericVerifierTest, AnAnswerThatIsNotANumberIsADataError) {
  auto v = MakeNumericVerifier(0.5);
  auto r = v->Score({"p", "3", "three"});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataError);
  EXPECT_FALSE(v->Score({"p", "3", "x 3"}).ok());
}

TEST(MakeVerifierTest, KnowsTheNamesAndChecksTheTolerance) {
  EXPECT_TRUE(MakeVerifier("addition", 0).ok());
  EXPECT_TRUE(MakeVerifier("exact", 0).ok());
  EXPECT_TRUE(MakeVerifier("numeric", 0.1).ok());
  EXPECT_TRUE(MakeVerifier("math", 0).ok());
  EXPECT_EQ(MakeVerifier("numeric", -1).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(MakeVerifier("fuzzy", 0).status().code(), Code::kInvalidArgument);
}

// The rules themselves are tested in lib/rl/task/math_answer_test.cc; this checks the adapter.
TEST(MathVerifierTest, ScoresTheBoxedAnswerAgainstTheReference) {
  auto v = MakeVerifier("math", 0);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*(*v)->Score({"p", "so \\boxed{\\frac{1}{2}}, not 7", "0.5"}), 1.0);
  EXPECT_EQ(*(*v)->Score({"p", "so \\boxed{\\frac{1}{2}}, not 7", "7"}), 0.0);
  EXPECT_EQ((*v)->Score({"p", "\\boxed{1}", ""}).status().code(), Code::kDataError);
}

// The demo task (lib/rl/task/addition.h), which rl-reward's make-data and rl-train share.
TEST(AdditionTaskTest, PromptsArePaddedAndAnswersAreSums) {
  EXPECT_EQ(task::AdditionPrompt(37, 480), "037+480=");
  for (const task::Problem& e : task::MakeProblems(200, 1)) {
    ASSERT_EQ(e.prompt.size(), 8u);
    int a = std::stoi(e.prompt.substr(0, 3)), b = std::stoi(e.prompt.substr(4, 3));
    EXPECT_EQ(e.answer, task::AdditionAnswer(a + b));
    EXPECT_EQ(e.answer.size(), 4u);
    EXPECT_FALSE(task::IsHeldOut(a, b));
  }
}

TEST(AdditionTaskTest, HeldOutSetIsFixedNestedAndDisjointFromTraining) {
  auto h1 = task::HeldOutSet(100), h2 = task::HeldOutSet(300);
  std::set<std::string> held;
  for (size_t i = 0; i < h1.size(); ++i) {
    EXPECT_EQ(h1[i].prompt, h2[i].prompt) << "a larger held-out set starts with the smaller";
    held.insert(h1[i].prompt);
  }
  for (uint64_t seed = 0; seed < 5; ++seed) {
    for (const task::Problem& e : task::MakeProblems(2000, seed)) EXPECT_EQ(held.count(e.prompt), 0u);
  }
  int n = 0;
  for (int a = 0; a < 1000; ++a) {
    for (int b = 0; b < 1000; ++b) n += task::IsHeldOut(a, b);
  }
  EXPECT_GT(n, 15000);  // about 1 in 50 of 10^6
  EXPECT_LT(n, 25000);
}

}  // namespace
}  // namespace rl::reward
