// Python's string and float semantics, against values CPython 3.11 gives (repr, split, ...).
#include "rl/model/chat/jinja_text.h"

#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace rl::chat::jinja {
namespace {

TEST(PyReprFloatTest, MatchesCPythonRepr) {
  const std::pair<double, const char*> cases[] = {
      {1.0, "1.0"},
      {1e16, "1e+16"},
      {1e15, "1000000000000000.0"},
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1e-05, "1e-05"},
      {0.0001, "0.0001"},
      {2.5e-5, "2.5e-05"},
      {123456789.123, "123456789.123"},
      {-0.0, "-0.0"},
      {5e-324, "5e-324"},
      {1.7976931348623157e+308, "1.7976931348623157e+308"},
      {1234567890123456.7, "1234567890123456.8"},
      {12345678901234567.0, "1.2345678901234568e+16"},
      {100.0, "100.0"},
      {1.5e300, "1.5e+300"},
  };
  for (const auto& [d, want] : cases) EXPECT_EQ(PyReprFloat(d), want) << want;
  EXPECT_EQ(PyReprFloat(std::numeric_limits<double>::infinity()), "inf");
  EXPECT_EQ(PyReprFloat(std::nan("")), "nan");
}

TEST(PyReprStringTest, ChoosesQuotesAndEscapesAsCPython) {
  EXPECT_EQ(PyReprString("plain"), "'plain'");
  EXPECT_EQ(PyReprString("a'b"), "\"a'b\"");
  EXPECT_EQ(PyReprString("a'\"b"), "'a\\'\"b'");
  EXPECT_EQ(PyReprString("t\tn\nr\rb\\"), "'t\\tn\\nr\\rb\\\\'");
  EXPECT_EQ(PyReprString("a\x7f\xc2\xad\xe2\x80\xa8\xc3\xa9\xf0\x9f\x98\x80"), "'a\\x7f\\xad\\u2028\xc3\xa9\xf0\x9f\x98\x80'");
  EXPECT_EQ(PyReprString(std::string("\0", 1)), "'\\x00'");
}

TEST(PySplitTest, WhitespaceSplitKeepsTheRestAfterMaxsplit) {
  using V = std::vector<std::string>;
  EXPECT_EQ(PySplit(" a  b ", std::nullopt, -1, false), (V{"a", "b"}));
  EXPECT_EQ(PySplit(" a  b ", std::nullopt, 1, false), (V{"a", "b "}));
  EXPECT_EQ(PySplit(" a b ", std::nullopt, 1, true), (V{" a", "b"}));
  EXPECT_EQ(PySplit("", std::nullopt, -1, false), V{});
  EXPECT_EQ(PySplit("a,b,,c", std::string(","), -1, false), (V{"a", "b", "", "c"}));
  EXPECT_EQ(PySplit("a,b,c", std::string(","), 1, true), (V{"a,b", "c"}));
  EXPECT_EQ(PySplit("", std::string(","), -1, false), V{""});
  EXPECT_EQ(PySplit("x</think>y</think>z", std::string("</think>"), -1, false), (V{"x", "y", "z"}));
}

TEST(PySplitLinesTest, BreaksOnEveryPythonLineBoundary) {
  using V = std::vector<std::string>;
  EXPECT_EQ(PySplitLines("a\r\nb\x0b" "c\x1c", false), (V{"a", "b", "c"}));
  EXPECT_EQ(PySplitLines("a\n\nb\n", false), (V{"a", "", "b"}));
  EXPECT_EQ(PySplitLines("a\r\nb", true), (V{"a\r\n", "b"}));
}

TEST(PyStripTest, StripsUnicodeWhitespaceOrTheGivenCharacters) {
  EXPECT_EQ(PyStrip("\xc2\xa0 x \xe3\x80\x80\n", std::nullopt, true, true), "x");
  EXPECT_EQ(PyStrip("xxhixx", std::string("x"), true, false), "hixx");
  EXPECT_EQ(PyStrip("\n\nhi\n\n", std::string("\n"), false, true), "\n\nhi");
  EXPECT_EQ(PyStrip("\xc3\xa9h\xc3\xa9", std::string("\xc3\xa9"), true, true), "h");
}

TEST(PyTextTest, ReplaceTitleAndCodePoints) {
  EXPECT_EQ(PyReplace("ab", "", "-", -1), "-a-b-");
  EXPECT_EQ(PyReplace("aaa", "a", "b", 2), "bba");
  EXPECT_EQ(PyTitle("hello wORLD they're 1st"), "Hello World They'Re 1St");
  EXPECT_EQ(JinjaTitle("hello big-world (x) they're"), "Hello Big-World (X) They're");
  EXPECT_EQ(PyCapitalize("hELLO World"), "Hello world");
  EXPECT_EQ(CodePointCount("h\xc3\xa9llo\xf0\x9f\x98\x80"), 6u);
  EXPECT_EQ(EncodeUtf8(DecodeUtf8("h\xc3\xa9\xf0\x9f\x98\x80")), "h\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(DecodeUtf8("\xff").size(), 1u);  // an invalid byte stays one code point
}

}  // namespace
}  // namespace rl::chat::jinja
