#include "rl/wire/value.h"

#include <gtest/gtest.h>

namespace rl {
namespace {

TEST(FindColumnTest, FindsTheFirstColumnOfThatNameAndNothingForAnAbsentOne) {
  std::vector<std::pair<std::string, Value>> row = {
      {"prompt", std::string("1+1")}, {"group", int64_t{5}}, {"group", int64_t{6}}, {"", Value()}};
  const Value* g = FindColumn(row, "group");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(std::get<int64_t>(*g), 5);
  EXPECT_EQ(g, &row[1].second);  // the row's own value, not a copy
  EXPECT_EQ(std::get<std::string>(*FindColumn(row, "prompt")), "1+1");
  EXPECT_EQ(FindColumn(row, "grou"), nullptr);  // whole names only
  EXPECT_EQ(FindColumn(row, "reward"), nullptr);
  EXPECT_EQ(FindColumn({}, "group"), nullptr);
}

}  // namespace
}  // namespace rl
