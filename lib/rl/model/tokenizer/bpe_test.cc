#include "rl/model/tokenizer/bpe.h"

#include <gtest/gtest.h>

namespace rl::tokenizer {
namespace {

using nlohmann::json;

Bpe Make(const json& merges, bool ignore_merges = false) {
  json model = {{"type", "BPE"},
                {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}, {"aa", 6}}},
                {"merges", merges},
                {"ignore_merges", ignore_merges}};
  auto bpe = Bpe::Load(model);
  EXPECT_TRUE(bpe.ok()) << bpe.status().ToString();
  return std::move(bpe.value());
}

std::vector<int64_t> Ids(const Bpe& bpe, std::string_view word) {
  std::vector<int64_t> ids;
  EXPECT_TRUE(bpe.Tokenize(word, &ids).ok());
  return ids;
}

TEST(BpeTest, MergesByRankNotByPosition) {
  // "b c" ranks before "a b": abc -> a bc, although ab comes first in the word.
  Bpe bpe = Make(json::array({"b c", "a b"}));
  EXPECT_EQ(Ids(bpe, "abc"), (std::vector<int64_t>{0, 4}));
  Bpe other = Make(json::array({"a b", "b c", "ab c"}));
  EXPECT_EQ(Ids(other, "abc"), (std::vector<int64_t>{5}));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  Bpe bpe = Make(json::array({"a a"}));
  EXPECT_EQ(Ids(bpe, "aaa"), (std::vector<int64_t>{6, 0}));
  EXPECT_EQ(Ids(bpe, "aaaa"), (std::vector<int64_t>{6, 6}));
}

TEST(BpeTest, ReadsMergesAsPairsAsWellAsStrings) {
  Bpe bpe = Make(json::array({json::array({"b", "c"}), json::array({"a", "b"})}));
  EXPECT_EQ(Ids(bpe, "abc"), (std::vector<int64_t>{0, 4}));
}

TEST(BpeTest, IgnoreMergesTakesAWholeWordThatIsInTheVocabulary) {
  // No merge makes "abc" here; with ignore_merges the vocabulary entry wins anyway.
  EXPECT_EQ(Ids(Make(json::array({"b c"}), false), "abc"), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(Ids(Make(json::array({"b c"}), true), "abc"), (std::vector<int64_t>{5}));
}

TEST(BpeTest, UnknownCharacterWithoutUnkTokenIsDataError) {
  Bpe bpe = Make(json::array());
  std::vector<int64_t> ids;
  EXPECT_EQ(bpe.Tokenize("axb", &ids).code(), Code::kDataError);
}

TEST(BpeTest, UnknownCharactersBecomeUnkFusedWhenAsked) {
  json model = {{"vocab", {{"a", 0}, {"<unk>", 1}}}, {"merges", json::array()}, {"unk_token", "<unk>"}};
  auto plain = Bpe::Load(model);
  ASSERT_TRUE(plain.ok());
  std::vector<int64_t> ids;
  ASSERT_TRUE(plain->Tokenize("axya", &ids).ok());
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 1, 0}));
  model["fuse_unk"] = true;
  auto fused = Bpe::Load(model);
  ids.clear();
  ASSERT_TRUE(fused->Tokenize("axya", &ids).ok());
  EXPECT_EQ(ids, (std::vector<int64_t>{0, 1, 0}));
}

TEST(BpeTest, MalformedModelsAreOneLineConfigErrors) {
  struct Case {
    json model;
    std::string message;
  };
  const json vocab = {{"a", 0}, {"b", 1}, {"ab", 2}};
  const std::vector<Case> cases = {
      {{{"merges", json::array()}}, "model.vocab is missing"},
      {{{"vocab", json::array()}}, "model.vocab is missing or not an object"},
      {{{"vocab", {{"a", "zero"}}}}, "model.vocab['a'] is not an id"},
      {{{"vocab", {{"a", -1}}}}, "model.vocab['a'] is not an id"},
      {{{"vocab", vocab}, {"merges", "a b"}}, "model.merges is not an array"},
      {{{"vocab", vocab}, {"merges", {"a c"}}}, "merge 1 names 'c', which is not in the vocabulary"},
      {{{"vocab", vocab}, {"merges", {"b a"}}}, "merge 1 makes 'ba', which is not in the vocabulary"},
      {{{"vocab", vocab}, {"merges", {"ab"}}}, "merge 1 'ab' is not two tokens"},
      {{{"vocab", vocab}, {"merges", {json::array({"a"})}}}, "merge 1 is neither"},
      {{{"vocab", vocab}, {"merges", {7}}}, "merge 1 is neither"},
      {{{"vocab", vocab}, {"byte_fallback", true}}, "byte_fallback is not supported"},
      {{{"vocab", vocab}, {"dropout", 0.1}}, "dropout is not supported"},
      {{{"vocab", vocab}, {"unk_token", "<unk>"}}, "unk_token '<unk>' is not in the vocabulary"},
      {{{"vocab", vocab}, {"ignore_merges", "yes"}}, "model.ignore_merges is not a boolean"},
  };
  for (const Case& c : cases) {
    auto bpe = Bpe::Load(c.model);
    ASSERT_FALSE(bpe.ok()) << c.model.dump();
    EXPECT_EQ(bpe.status().code(), Code::kConfig);
    EXPECT_NE(bpe.status().message().find(c.message), std::string::npos) << bpe.status().message();
    EXPECT_EQ(bpe.status().message().find('\n'), std::string::npos);
  }
}

}  // namespace
}  // namespace rl::tokenizer
