#include "rl/core/json_field.h"

#include <gtest/gtest.h>

namespace rl {
namespace {

const nlohmann::json kRecord = nlohmann::json::parse(R"({"name": "train", "n": 3, "neg": -2, "big": 18446744073709551615,
  "x": 2.5, "yes": true, "list": [1, 2], "map": {"a": 1}, "null": null})");

TEST(JsonFieldTest, FieldsOfTheAskedTypeAreRead) {
  EXPECT_EQ(TextField(kRecord, "name"), "train");
  EXPECT_EQ(IntField(kRecord, "n", -1), 3);
  EXPECT_EQ(IntField(kRecord, "neg", 0), -2);
  EXPECT_EQ(UintField(kRecord, "big", 0), UINT64_MAX);
  EXPECT_DOUBLE_EQ(NumberField(kRecord, "x", 0), 2.5);
  EXPECT_DOUBLE_EQ(NumberField(kRecord, "n", 0), 3.0) << "an integer is a number";
  EXPECT_TRUE(BoolField(kRecord, "yes", false));
  EXPECT_EQ(ArrayField(kRecord, "list").size(), 2u);
  EXPECT_EQ(ObjectField(kRecord, "map").size(), 1u);
}

TEST(JsonFieldTest, WrongTypesAndMissingKeysAreTheDefault) {
  EXPECT_EQ(TextField(kRecord, "n", "none"), "none");
  EXPECT_EQ(TextField(kRecord, "null", "none"), "none");
  EXPECT_EQ(TextField(kRecord, "absent"), "");
  EXPECT_EQ(IntField(kRecord, "x", -1), -1) << "2.5 is no integer";
  EXPECT_EQ(IntField(kRecord, "big", -1), -1) << "2^64 - 1 does not fit int64";
  EXPECT_EQ(IntField(kRecord, "name", -1), -1);
  EXPECT_EQ(UintField(kRecord, "neg", 7), 7u);
  EXPECT_DOUBLE_EQ(NumberField(kRecord, "yes", -1), -1) << "a bool is no number";
  EXPECT_FALSE(BoolField(kRecord, "n", false));
  EXPECT_TRUE(ArrayField(kRecord, "map").empty());
  EXPECT_TRUE(ArrayField(kRecord, "map").is_array());
  EXPECT_TRUE(ObjectField(kRecord, "list").is_object());
  for (const nlohmann::json& not_object : {nlohmann::json(5), nlohmann::json::array({1}), nlohmann::json()}) {
    EXPECT_EQ(TextField(not_object, "name", "d"), "d");
    EXPECT_EQ(IntField(not_object, "n", 4), 4);
  }
}

TEST(JsonFieldTest, OrderedJsonToo) {
  const auto j = nlohmann::ordered_json::parse(R"({"b": "x", "a": 1})");
  EXPECT_EQ(TextField(j, "b"), "x");
  EXPECT_EQ(IntField(j, "a", 0), 1);
  EXPECT_TRUE(ArrayField(j, "a").empty());
}

TEST(JsonFieldTest, JsonTextReplacesBytesThatAreNotUtf8) {
  const nlohmann::json j = {{"lane", std::string("tr\xff" "ain")}};
  EXPECT_THROW((void)j.dump(), nlohmann::json::type_error) << "why JsonText exists";
  EXPECT_EQ(JsonText(j), "{\"lane\":\"tr\xef\xbf\xbd" "ain\"}");
}

}  // namespace
}  // namespace rl
