#include "rl/env/calc.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>

namespace rl::env {
namespace {

int64_t Eval(const std::string& s) {
  auto r = EvalIntExpression(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().message();
  return r.ok() ? *r : -424242;
}

std::string ErrorOf(const std::string& s) {
  auto r = EvalIntExpression(s);
  EXPECT_FALSE(r.ok()) << s << " gave " << (r.ok() ? *r : 0);
  return r.ok() ? "" : r.status().message();
}

TEST(CalcTest, PrecedenceAssociativityAndParentheses) {
  EXPECT_EQ(Eval("12*34"), 408);
  EXPECT_EQ(Eval("2+3*4"), 14);
  EXPECT_EQ(Eval("(2+3)*4"), 20);
  EXPECT_EQ(Eval("10-4-3"), 3);  // from the left
  EXPECT_EQ(Eval("100/10/5"), 2);
  EXPECT_EQ(Eval("2*3%4"), 2);
  EXPECT_EQ(Eval(" ( ( 7 ) ) "), 7);
  EXPECT_EQ(Eval("1+2*(3-4*(5+6))"), -81);
  EXPECT_EQ(Eval("007"), 7);
}

TEST(CalcTest, UnarySignsAndCDivision) {
  EXPECT_EQ(Eval("-3"), -3);
  EXPECT_EQ(Eval("--3"), 3);
  EXPECT_EQ(Eval("+3"), 3);
  EXPECT_EQ(Eval("2*-3"), -6);
  EXPECT_EQ(Eval("-(2+3)*4"), -20);
  EXPECT_EQ(Eval("7/2"), 3);
  EXPECT_EQ(Eval("-7/2"), -3);  // toward zero
  EXPECT_EQ(Eval("7%3"), 1);
  EXPECT_EQ(Eval("-7%3"), -1);  // the dividend's sign
  EXPECT_EQ(Eval("7%-3"), 1);
}

TEST(CalcTest, EveryStepIsCheckedForOverflow) {
  EXPECT_EQ(Eval("9223372036854775807"), INT64_MAX);
  EXPECT_EQ(Eval("-9223372036854775807-1"), INT64_MIN);
  EXPECT_EQ(ErrorOf("9223372036854775808"), "overflow");
  EXPECT_EQ(ErrorOf("9223372036854775807+1"), "overflow");
  EXPECT_EQ(ErrorOf("-9223372036854775807-2"), "overflow");
  EXPECT_EQ(ErrorOf("4294967296*4294967296"), "overflow");
  EXPECT_EQ(ErrorOf("(-9223372036854775807-1)/-1"), "overflow");
  EXPECT_EQ(ErrorOf("-(-9223372036854775807-1)"), "overflow");
  EXPECT_EQ(Eval("(-9223372036854775807-1)%-1"), 0);
  EXPECT_EQ(ErrorOf("99999999999999999999999999"), "overflow");
}

TEST(CalcTest, DivisionByZero) {
  EXPECT_EQ(ErrorOf("1/0"), "division by zero");
  EXPECT_EQ(ErrorOf("5%(3-3)"), "division by zero");
}

TEST(CalcTest, MalformedInputSaysWhereAndWhatAndWinsOverArithmetic) {
  for (const char* s : {"", " ", "2+", "2+*3", "(1", "1)", "2 3", "a", "1.5", "2**3", "()", "1e3", "0x10"}) {
    std::string e = ErrorOf(s);
    EXPECT_EQ(e.rfind("cannot parse", 0), 0u) << s << ": " << e;
    EXPECT_NE(e.find("at offset"), std::string::npos) << e;
  }
  EXPECT_EQ(ErrorOf("2+*3"), "cannot parse '2+*3': expected a number but found '*' at offset 2");
  EXPECT_EQ(ErrorOf("(1"), "cannot parse '(1': expected ')' but found end at offset 2");
  EXPECT_EQ(ErrorOf("1/0 +"), "cannot parse '1/0 +': expected a number but found end at offset 5");
  EXPECT_NE(ErrorOf(std::string("1+\x01")).find("byte 0x01"), std::string::npos);
}

TEST(CalcTest, DeepNestingIsAnErrorNotAStackOverflow) {
  EXPECT_EQ(Eval(std::string(150, '(') + "1" + std::string(150, ')')), 1);
  EXPECT_NE(ErrorOf(std::string(100000, '(') + "1" + std::string(100000, ')')).find("nested deeper than"),
            std::string::npos);
  EXPECT_NE(ErrorOf(std::string(100000, '-') + "1").find("nested deeper than"), std::string::npos);
  // A long flat expression needs no depth.
  std::string sum = "0";
  for (int i = 0; i < 100000; ++i) sum += "+1";
  EXPECT_EQ(Eval(sum), 100000);
}

TEST(CalcTest, RandomBytesNeverCrash) {
  std::mt19937_64 rng(7);
  const std::string alphabet = "0123456789+-*/%() \t9223372036854775807";
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 40, '\0');
    for (char& c : s) c = i % 2 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng());
    auto r = EvalIntExpression(s);
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), Code::kDataError);
    }
    std::string reply = CalcReply(s);  // as a request line too: always one JSON line
    EXPECT_EQ(reply.find('\n'), std::string::npos);
    EXPECT_FALSE(reply.empty());
  }
}

TEST(CalcTest, TheToolAnswersEachLineInOrder) {
  std::istringstream in(
      "{\"name\":\"calc\",\"arguments\":\"12*34\"}\n"
      "\n"
      "{\"name\":\"calc\",\"arguments\":{\"expression\":\"1/0\"}}\n"
      "{\"name\":\"calc\",\"arguments\":[1]}\n"
      "not json\n");
  std::ostringstream out;
  EXPECT_EQ(RunCalcTool(in, out), 0);
  EXPECT_EQ(out.str(),
            "{\"output\":\"408\"}\n"
            "{\"error\":\"division by zero\"}\n"
            "{\"error\":\"calc wants its arguments as a string or {\\\"expression\\\": string}\"}\n"
            "{\"error\":\"the request is not a JSON object\"}\n");
}

}  // namespace
}  // namespace rl::env
