#include "rl/task/math_answer.h"

#include <gtest/gtest.h>

#include <random>

#include "rl/task/rational.h"

namespace rl::task {
namespace {

struct Case {
  const char* response;
  const char* reference;
  double reward;
};

// Each row: a response, the reference answer, and the reward the math verifier must give.
const Case kCases[] = {
    // Extraction: \boxed, \fbox, ####, the last number.
    {"so the total is \\boxed{19}.", "19", 1},
    {"$\\boxed 5$", "5", 1},
    {"\\boxed 5 apples", "5", 1},
    {"\\fbox{7}", "7", 1},
    {"#### 1,234", "1234", 1},
    {"48/2 = 24 clips in May.\n#### 72\n", "72", 1},
    {"He has 19 apples.", "19", 1},
    {"#### 19 apples", "19", 1},
    {"The temperature is -7 degrees", "-7", 1},
    {"The temperature is -7 degrees", "7", 0},
    {"no numbers here", "5", 0},
    {"", "5", 0},
    // A boxed answer overrides later numbers; the last box wins; a truncated box is passed over.
    {"\\boxed{5}. Check: 2+3=5, and 7 more.", "5", 1},
    {"\\boxed{5}. Check: 2+3=5, and 7 more.", "7", 0},
    {"\\boxed{3} no wait, \\boxed{4}", "4", 1},
    {"\\boxed{3} no wait, \\boxed{4}", "3", 0},
    {"\\boxed{3} then \\boxed{12", "3", 1},
    {"\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{1}{\\sqrt{2}}", 1},
    {"\\boxed{{5}}", "5", 1},
    {"#### 8\n\\boxed{9}", "9", 1},
    // Numbers: decimals, trailing zeros, thousands, signs.
    {"\\boxed{12}", "1.2", 0},
    {"\\boxed{1,000}", "1000.5", 0},
    {"\\boxed{1,000}", "1000", 1},
    {"\\boxed{10,000,000}", "10000000", 1},
    {"\\boxed{1\\!000}", "1000", 1},
    {"\\boxed{1{,}000}", "1000", 1},
    {"\\boxed{2.50}", "2.5", 1},
    {"\\boxed{3.0}", "3", 1},
    {"\\boxed{5.}", "5", 1},
    {"\\boxed{.5}", "0.5", 1},
    {"\\boxed{-3}", "-3", 1},
    {"\\boxed{-3}", "3", 0},
    {"\\boxed{\xE2\x88\x92 3}", "-3", 1},
    {"\\boxed{-0}", "0", 1},
    {"\\boxed{123456789012345678901234567890123456789}", "123456789012345678901234567890123456789", 1},
    {"\\boxed{123456789012345678901234567890123456789}", "123456789012345678901234567890123456780", 0},
    // Fractions as exact rationals.
    {"The answer is 1/2.", "0.5", 1},
    {"\\boxed{\\frac{1}{2}}", "0.5", 1},
    {"\\boxed{\\dfrac{1}{2}}", "1/2", 1},
    {"\\boxed{\\tfrac12}", "0.50", 1},
    {"\\boxed{\\frac12}", "\\frac{1}{2}", 1},
    {"\\boxed{\\frac{2}{6}}", "1/3", 1},
    {"\\boxed{3/4}", "0.76", 0},
    {"\\boxed{0.333}", "1/3", 0},
    {"\\boxed{-\\frac{1}{2}}", "-0.5", 1},
    {"\\boxed{\\frac{-1}{2}}", "-1/2", 1},
    {"\\boxed{\\frac{1}{2}}", "-1/2", 0},
    {"\\boxed{\\frac{1}{0}}", "1", 0},
    // Dollars, percent, degrees, units, text.
    {"\\boxed{\\$18}", "18", 1},
    {"It costs $18.00.", "18", 1},
    {"\\boxed{\\$1,234.50}", "1234.5", 1},
    {"\\boxed{50\\%}", "50", 1},
    {"\\boxed{50%}", "50", 1},
    {"\\boxed{90^\\circ}", "90", 1},
    {"\\boxed{90^{\\circ}}", "90", 1},
    {"\\boxed{90\xC2\xB0}", "90", 1},
    {"\\boxed{19 \\text{ apples}}", "19", 1},
    {"\\boxed{12 \\text{cm}^2}", "12", 1},
    {"\\boxed{5 \\mbox{m/s}}", "5", 1},
    {"\\boxed{5 apples and 3 pears}", "5", 0},
    {"\\boxed{x = 5}", "5", 1},
    {"\\boxed{2\\pi}", "2", 0},
    // Non-numeric answers compared as normalized strings.
    {"\\boxed{\\text{(B)}}", "B", 1},
    {"\\boxed{(B)}", "(C)", 0},
    {"\\boxed{\\left( 1, 2 \\right)}", "(1,2)", 1},
    {"\\boxed{(0.5, 1)}", "(\\frac12, 1)", 1},
    {"\\boxed{[1, 2)}", "(1, 2)", 0},
    {"\\boxed{\\{1,2\\}}", "\\{1, 2\\}", 1},
    {"\\boxed{\\frac{\\sqrt{3}}{2}}", "\\dfrac{\\sqrt{3}}{2}", 1},
    {"\\boxed{\\frac{\\sqrt{3}}{2}}", "\\frac{\\sqrt{2}}{2}", 0},
    // A worked solution as the reference: its own final answer is compared.
    {"#### 72", "Natalia sold 48/2 = 24 clips in May.\n#### 72", 1},
    {"0.75", "so the answer is $\\boxed{\\frac{3}{4}}$.", 1},
    {"#### 73", "Natalia sold 48/2 = 24 clips in May.\n#### 72", 0},
};

TEST(MathRewardTest, ScoresEveryCaseOfTheTable) {
  ASSERT_GE(sizeof kCases / sizeof kCases[0], 40u);
  for (const Case& c : kCases) {
    Result<double> r = MathReward(c.response, c.reference);
    ASSERT_TRUE(r.ok()) << c.response << " vs " << c.reference << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.reward) << "response '" << c.response << "' reference '" << c.reference << "' (normalized '"
                            << NormalizeMathAnswer(ExtractMathAnswer(c.response).value_or("")) << "' vs '"
                            << NormalizeReference(c.reference) << "')";
  }
}

TEST(MathRewardTest, AnEmptyReferenceIsADataError) {
  EXPECT_EQ(MathReward("\\boxed{1}", "").status().code(), Code::kDataError);
  EXPECT_EQ(MathReward("\\boxed{1}", " $ ").status().code(), Code::kDataError);
}

TEST(MathAnswerTest, ExtractsTheAnswerBeforeNormalizing) {
  EXPECT_EQ(ExtractMathAnswer("a \\boxed{\\frac{1}{\\sqrt{2}}} b"), "\\frac{1}{\\sqrt{2}}");
  EXPECT_EQ(ExtractMathAnswer("x\n#### $1,234 \nmore"), "$1,234");
  EXPECT_EQ(ExtractMathAnswer("values 1,2"), "2");
  EXPECT_EQ(ExtractMathAnswer("total 1,234,567.5 units"), "1,234,567.5");
  EXPECT_EQ(ExtractMathAnswer("ratio 3/4."), "3/4");
  EXPECT_EQ(ExtractMathAnswer("3-7"), "7");
  EXPECT_EQ(ExtractMathAnswer("x 1234,567"), "567");
  EXPECT_EQ(ExtractMathAnswer("#### \n so 4"), "4");
  EXPECT_EQ(ExtractMathAnswer("nothing"), std::nullopt);
  EXPECT_EQ(LastBoxed("\\boxedx{1} \\boxed{2"), std::nullopt);
}

TEST(MathAnswerTest, NormalizesToOneCanonicalString) {
  const std::pair<const char*, const char*> kForms[] = {
      {"2.50", "2.5"},       {"3.0", "3"},        {"1,234", "1234"},       {"1,2", "1,2"},
      {"12,34", "12,34"},    {"\\frac{1}{3}", "1/3"}, {"-0", "0"},         {"\\$1,234.50", "1234.5"},
      {"12 cm^2", "12"},     {"(B)", "B"},        {"0.125", "0.125"},      {"\\frac{10}{4}", "2.5"},
      {"007", "7"},          {"1/8", "0.125"},    {"\\left[ 1,2 \\right]", "[1,2]"},
  };
  for (auto [in, out] : kForms) EXPECT_EQ(NormalizeMathAnswer(in), out) << in;
}

// Against an independent reading: a/b with small integers as long double, and a decimal written by
// printf. Equal rationals must give equal strings and unequal ones different strings.
TEST(RationalTest, CanonicalStringsAgreeWithArithmetic) {
  std::mt19937 gen(7);
  for (int i = 0; i < 2000; ++i) {
    int a = static_cast<int>(gen() % 401) - 200, b = static_cast<int>(gen() % 40) + 1;
    int c = static_cast<int>(gen() % 401) - 200, d = static_cast<int>(gen() % 40) + 1;
    std::string x = NormalizeMathAnswer("\\frac{" + std::to_string(a) + "}{" + std::to_string(b) + "}");
    std::string y = NormalizeMathAnswer(std::to_string(c) + "/" + std::to_string(d));
    EXPECT_EQ(x == y, a * d == c * b) << a << "/" << b << " vs " << c << "/" << d;
    if (10000 % b == 0) {  // a terminating decimal with at most 4 places
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.4Lf", static_cast<long double>(a) / b);
      EXPECT_EQ(NormalizeMathAnswer(buf), x) << buf;
    }
  }
}

TEST(RationalTest, RejectsWhatIsNotANumber) {
  for (const char* s : {"", "-", ".", "1.2.3", "--5", "1/0", "1/", "/2", "\\frac{1}{}", "1e3", "0x10", "１"}) {
    EXPECT_FALSE(ParseRational(s).has_value()) << s;
  }
  EXPECT_EQ(CanonicalString(*ParseRational("-\\frac{-3}{-6}")), "-0.5");
}

TEST(MathAnswerTest, SurvivesRandomBytes) {
  std::mt19937_64 gen(11);
  const std::string alphabet = "\\{}$%#0123456789.,/-+ boxedfrac^circletx()[]\n\xC2\xB0\xE2\x88\x92";
  for (int i = 0; i < 20000; ++i) {
    std::string s(gen() % 64, ' ');
    for (char& c : s) c = gen() % 4 ? alphabet[gen() % alphabet.size()] : static_cast<char>(gen());
    Result<double> r = MathReward(s, s);
    if (r.ok()) {
      EXPECT_TRUE(*r == 0.0 || *r == 1.0);
    }
  }
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "\\text{";
  EXPECT_EQ(*MathReward("\\boxed{" + deep + "}", "1"), 0.0);
  EXPECT_FALSE(NormalizeMathAnswer(deep + "1" + std::string(100000, '}')).empty());
  // Many unclosed boxes and nested braces stay linear (a quadratic scan would take minutes).
  std::string boxes;
  for (int i = 0; i < 100000; ++i) boxes += "\\boxed{";
  EXPECT_EQ(*MathReward(boxes + "\\boxed{7}" + boxes, "7"), 1.0);
  EXPECT_EQ(NormalizeMathAnswer(std::string(100000, '{') + "5" + std::string(100000, '}')).size(), 100000u * 2 - 64 + 1);
  std::string commas;
  for (int i = 0; i < 100000; ++i) commas += "1{,}^\\circ";
  EXPECT_EQ(NormalizeMathAnswer(commas).size(), 200000u);  // "1,1,...,1,"
}

}  // namespace
}  // namespace rl::task
