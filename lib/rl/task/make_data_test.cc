#include "rl/task/make_data.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "rl/task/addition.h"
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
  EXPECT_EQ(WriteTaskData(o, out).message(), "unknown task 'chess' (addition or words)");
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

}  // namespace
}  // namespace rl::task
