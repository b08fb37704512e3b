#include "rl/task/make_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>
#include <sstream>

#include "rl/task/addition.h"
#include "rl/task/multiply.h"
#include "rl/task/word_problems.h"

namespace rl::task {
namespace {

std::vector<nlohmann::ordered_json> Lines(const std::string& text) {
  std::vector<nlohmann::ordered_json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::ordered_json::parse(line));
  return out;
}

TEST(MakeDataTest, AdditionIsWrittenAsBefore) {
  std::ostringstream out;
  MakeDataOptions o;
  o.count = 2;
  o.seed = 5;
  ASSERT_TRUE(WriteTaskData(o, out).ok());
  std::vector<Problem> want = MakeProblems(2, 5);
  EXPECT_EQ(out.str(), "{\"answer\":\"" + want[0].answer + "\",\"prompt\":\"" + want[0].prompt + "\"}\n{\"answer\":\"" +
                           want[1].answer + "\",\"prompt\":\"" + want[1].prompt + "\"}\n");
}

TEST(MakeDataTest, WordsCarryAResponseOnlyWhenAFormatIsAsked) {
  MakeDataOptions o;
  o.task = "words";
  o.count = 3;
  std::ostringstream plain, sft, held;
  ASSERT_TRUE(WriteTaskData(o, plain).ok());
  o.response_format = "gsm8k";
  ASSERT_TRUE(WriteTaskData(o, sft).ok());
  o.held_out = true;
  ASSERT_TRUE(WriteTaskData(o, held).ok());
  auto a = Lines(plain.str()), b = Lines(sft.str()), h = Lines(held.str());
  ASSERT_EQ(a.size(), 3u);
  std::vector<WordProblem> want = *DrawWordProblems(3, 1, false);
  std::vector<WordProblem> want_held = *WordProblemsHeldOut(3);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(a[i].dump(), nlohmann::ordered_json({{"prompt", want[i].prompt}, {"answer", want[i].answer}}).dump());
    EXPECT_EQ(b[i]["response"], WordProblemResponse(want[i], ResponseFormat::kGsm8k));
    EXPECT_EQ(h[i]["prompt"], want_held[i].prompt);
  }
}

TEST(MakeDataTest, AnUnknownTaskOrFormatIsAUsageError) {
  std::ostringstream out;
  MakeDataOptions o;
  o.task = "chess";
  EXPECT_EQ(WriteTaskData(o, out).message(), "unknown task 'chess' (addition, words, multiply or chain)");
  o.task = "addition";
  o.response_format = "boxed";
  EXPECT_EQ(WriteTaskData(o, out).code(), Code::kInvalidArgument);
  o.task = "words";
  o.response_format = "latex";
  EXPECT_EQ(WriteTaskData(o, out).code(), Code::kInvalidArgument);
  o.response_format = "none";
  o.max_number = 9;  // below what a subtraction needs
  EXPECT_EQ(WriteTaskData(o, out).code(), Code::kInvalidArgument);
  o.task = "addition";
  o.max_number = 20;
  EXPECT_EQ(WriteTaskData(o, out).message(), "--max-number is for --task words");
  EXPECT_EQ(out.str(), "");
}

// The agent demo's tasks: training and held-out products never share a pair, and a "tools"
// response calls the calculator with the right expressions and ends in the answer.
TEST(MakeDataTest, MultiplyAndChainResponsesCallTheCalculator) {
  std::set<std::string> train, held;
  for (const Problem& p : DrawMultiplyProblems(3000, 1, false)) train.insert(p.prompt);
  for (const Problem& p : DrawMultiplyProblems(300, kHeldOutSeed, true)) held.insert(p.prompt);
  for (const std::string& p : held) EXPECT_EQ(train.count(p), 0u) << p;
  EXPECT_GT(held.size(), 100u);
  Problem m = DrawMultiplyProblems(1, 3, false)[0];
  const int a = std::stoi(m.prompt), b = std::stoi(m.prompt.substr(m.prompt.find('*') + 1));
  EXPECT_EQ(m.answer, std::to_string(a * b));
  EXPECT_EQ(MultiplyToolResponse(m), "<call>" + m.prompt.substr(0, m.prompt.size() - 1) + "</call><result>" +
                                         m.answer + "</result>" + m.answer);
  Problem c{"12*34+56*78=", "4776"};
  EXPECT_EQ(ChainToolResponse(c),
            "<call>12*34</call><result>408</result><call>56*78</call><result>4368</result>"
            "<call>408+4368</call><result>4776</result>4776");
  std::ostringstream out;
  MakeDataOptions o;
  o.task = "chain";
  o.count = 3;
  o.response_format = "gsm8k";
  EXPECT_EQ(WriteTaskData(o, out).code(), Code::kInvalidArgument);
  o.response_format = "tools";
  ASSERT_TRUE(WriteTaskData(o, out).ok());
  const std::string text = out.str();
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 3);
}

}  // namespace
}  // namespace rl::task
