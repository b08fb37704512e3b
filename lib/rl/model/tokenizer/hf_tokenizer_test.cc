#include "rl/model/tokenizer/hf_tokenizer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "rl/model/tokenizer/load.h"
#include "rl/model/tokenizer/reference_util.h"

namespace rl::tokenizer {
namespace {

using nlohmann::json;

// A small byte-level file: single letters, "ab", and three added tokens.
json SmallFile() {
  json vocab = json::object();
  int id = 0;
  for (const char* t : {"a", "b", "c", "Ġ", "ab", "Ġa", "<", ">", "|", "ä"}) vocab[t] = id++;
  return {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "Ġ a"}}}},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"added_tokens",
       {{{"id", 10}, {"content", "<|a|>"}, {"special", true}},
        {{"id", 11}, {"content", "cab"}, {"special", false}, {"single_word", true}},
        {{"id", 12}, {"content", "<s>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}}}},
  };
}

std::shared_ptr<const HfTokenizer> Load(const json& j) {
  auto t = HfTokenizer::FromJson(j.dump());
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

std::vector<int64_t> Ids(const HfTokenizer& t, std::string_view text, model::EncodeOptions o = {}) {
  auto ids = t.EncodeWith(text, o);
  EXPECT_TRUE(ids.ok()) << ids.status().ToString();
  return ids.ok() ? *ids : std::vector<int64_t>{};
}

TEST(HfTokenizerTest, SpecialTokensAreFoundUnlessTheyAreText) {
  auto t = Load(SmallFile());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "ab<|a|>a"), (std::vector<int64_t>{4, 10, 0}));
  model::EncodeOptions as_text;
  as_text.parse_special_tokens = false;
  EXPECT_EQ(Ids(*t, "ab<|a|>a", as_text), (std::vector<int64_t>{4, 6, 8, 0, 8, 7, 0}));
  EXPECT_TRUE(t->IsSpecial(10));
  EXPECT_FALSE(t->IsSpecial(11));
  EXPECT_FALSE(t->IsSpecial(4));
  EXPECT_EQ(*t->Decode({4, 10, 0}), "aba");
  EXPECT_EQ(*t->DecodeWith({4, 10, 0}, {false}), "ab<|a|>a");
}

TEST(HfTokenizerTest, SingleWordTokenMatchesOnlyAsAWholeWord) {
  auto t = Load(SmallFile());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "cab"), (std::vector<int64_t>{11}));
  EXPECT_EQ(Ids(*t, "a cab"), (std::vector<int64_t>{0, 3, 11}));
  EXPECT_EQ(Ids(*t, "acab"), (std::vector<int64_t>{0, 2, 4}));  // touches 'a': not the token
}

TEST(HfTokenizerTest, LstripAndRstripTakeTheSpacesAround) {
  auto t = Load(SmallFile());
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(Ids(*t, "a  <s>  b"), (std::vector<int64_t>{0, 12, 1}));
}

TEST(HfTokenizerTest, TextThatIsNotUtf8IsDataError) {
  auto t = Load(SmallFile());
  ASSERT_NE(t, nullptr);
  auto ids = t->Encode("ab\xC3");
  EXPECT_EQ(ids.status().code(), Code::kDataError);
  EXPECT_NE(ids.status().message().find("not valid UTF-8 at byte 2"), std::string::npos);
}

TEST(HfTokenizerTest, DecodeSkipsIdsWithoutATokenAndReplacesBrokenUtf8) {
  auto t = Load(SmallFile());  // "ä" (9) in the byte-level alphabet is the byte 0xE4 alone
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(*t->Decode({0, 999, -5, 1}), "ab");
  EXPECT_EQ(*t->Decode({0, 9, 1}), "a\xEF\xBF\xBD" "b");
}

TEST(HfTokenizerTest, EncodesFromManyThreadsAtOnce) {
  auto t = Load(SmallFile());
  ASSERT_NE(t, nullptr);
  std::string text;
  for (int i = 0; i < 2000; ++i) text += i % 7 == 0 ? "  <s> cab " : "ab abc  a ";
  const std::vector<int64_t> want = Ids(*t, text);
  std::vector<std::thread> threads;
  std::atomic<int> same{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 5; ++k) same += t->Encode(text).value() == want;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(same.load(), 20);
}

TEST(HfTokenizerTest, MalformedFilesAreOneLineConfigErrors) {
  struct Case {
    std::string text;
    std::string message;
  };
  const std::string good = SmallFile().dump();
  auto edit = [](const std::function<void(json&)>& f) {
    json j = SmallFile();
    f(j);
    return j.dump();
  };
  const std::vector<Case> cases = {
      {good.substr(0, good.size() / 2), "not valid JSON"},
      {"", "not valid JSON"},
      {"[1, 2]", "not a JSON object"},
      {"{}", "no \"model\" object"},
      {edit([](json& j) { j["model"]["type"] = "WordPiece"; }), "model type 'WordPiece' is not supported"},
      {edit([](json& j) { j["model"]["type"] = "Unigram"; }), "model type 'Unigram' is not supported"},
      {edit([](json& j) { j["model"]["type"] = 3; }), "model.type is not a string"},
      {edit([](json& j) { j["model"]["merges"] = {"a q"}; }), "merge 1 names 'q'"},
      {edit([](json& j) { j["pre_tokenizer"] = {{"type", "Metaspace"}}; }), "pre_tokenizer type 'Metaspace' is not supported"},
      {edit([](json& j) { j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}}; }),
       "bad regex /(a/"},
      {edit([](json& j) { j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", "x"}}; }), "Split has no pattern object"},
      {edit([](json& j) { j["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}}, {"behavior", "Sideways"}}; }),
       "Split behavior 'Sideways' is not supported"},
      {edit([](json& j) { j["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", 1}}; }), "has no \"pretokenizers\" list"},
      {edit([](json& j) { j["pre_tokenizer"] = "ByteLevel"; }), "pre_tokenizer is not an object"},
      {edit([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }), "normalizer type 'Lowercase' is not supported"},
      {edit([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }), "decoder type 'WordPiece' is not supported"},
      {edit([](json& j) { j["post_processor"] = {{"type", "TemplateProcessing"}, {"single", {{{"SpecialToken", {{"id", "<q>"}}}}}}}; }),
       "names special token '<q>'"},
      {edit([](json& j) { j["post_processor"] = {{"type", "Unknown"}}; }), "post_processor type 'Unknown' is not supported"},
      {edit([](json& j) { j["added_tokens"] = {{{"id", "x"}, {"content", "<q>"}}}; }), "an added token has no valid \"id\""},
      {edit([](json& j) { j["added_tokens"] = {{{"id", 10}, {"content", ""}}}; }), "added token 10 has no \"content\""},
      {edit([](json& j) { j["added_tokens"] = {{{"id", 10}, {"content", "<q>"}, {"lstrip", "yes"}}}; }), "lstrip is not a boolean"},
      {edit([](json& j) { j["added_tokens"] = 5; }), "added_tokens is not a list"},
  };
  for (const Case& c : cases) {
    auto t = HfTokenizer::FromJson(c.text);
    ASSERT_FALSE(t.ok()) << c.message;
    EXPECT_EQ(t.status().code(), Code::kConfig) << t.status().ToString();
    EXPECT_NE(t.status().message().find(c.message), std::string::npos) << t.status().message();
    EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << t.status().message();
  }
}

// The real files: what the corpus comparison shows on the whole, here on cases named by intent.
class RealFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string why = testing::ReferenceMissing();
    if (!why.empty()) GTEST_SKIP() << why;
  }
  static std::vector<std::string> Tokens(const model::Tokenizer& t, const std::vector<int64_t>& ids) {
    std::vector<std::string> out;
    for (int64_t id : ids) out.push_back(t.IdToToken(id).value_or("?"));
    return out;
  }
};

TEST_F(RealFileTest, QwenSplitsDigitsSinglyAndLlamaInRunsOfThree) {
  auto qwen = LoadTokenizer(testing::ModelDir("qwen3"));
  auto llama = LoadTokenizer(testing::ModelDir("llama3"));
  ASSERT_TRUE(qwen.ok() && llama.ok()) << qwen.status().ToString() << llama.status().ToString();
  EXPECT_EQ(Tokens(*qwen->tokenizer, *qwen->tokenizer->Encode("1234567")),
            (std::vector<std::string>{"1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(Tokens(*llama->tokenizer, *llama->tokenizer->Encode("1234567")),
            (std::vector<std::string>{"123", "456", "7"}));
}

TEST_F(RealFileTest, QwenNormalizesCombiningMarksToNfcAsItsFileDeclares) {
  const std::string path = testing::ModelDir("qwen3") + "/tokenizer.json";
  const std::string text = testing::ReadAll(path);
  auto nfc = HfTokenizer::FromJson(text);
  json j = json::parse(text);
  j["normalizer"] = nullptr;
  auto raw = HfTokenizer::FromJson(j.dump());
  ASSERT_TRUE(nfc.ok() && raw.ok());
  const std::string decomposed = "cafe\xCC\x81";  // e + U+0301
  const std::string composed = "caf\xC3\xA9";
  EXPECT_EQ(*(*nfc)->Encode(decomposed), *(*nfc)->Encode(composed));
  EXPECT_NE(*(*raw)->Encode(decomposed), *(*raw)->Encode(composed));  // the normalizer matters
  EXPECT_EQ(*(*nfc)->Decode(*(*nfc)->Encode(decomposed)), composed);
}

TEST_F(RealFileTest, SpecialIdsComeFromTokenizerConfig) {
  auto qwen = LoadTokenizer(testing::ModelDir("qwen3"));
  auto llama = LoadTokenizer(testing::ModelDir("llama3"));
  ASSERT_TRUE(qwen.ok() && llama.ok());
  EXPECT_EQ(qwen->tokenizer->pad_id(), 151643);  // <|endoftext|>
  EXPECT_EQ(qwen->tokenizer->eos_id(), 151645);  // <|im_end|>
  EXPECT_EQ(qwen->tokenizer->bos_id(), -1);
  EXPECT_EQ(qwen->tokenizer->vocab_size(), 151669);
  EXPECT_EQ(qwen->tokenizer->TokenToId("<think>"), 151667);
  EXPECT_FALSE(qwen->tokenizer->IsSpecial(151667));
  EXPECT_TRUE(qwen->tokenizer->IsSpecial(151644));
  EXPECT_EQ(qwen->config.model_max_length, 131072);
  EXPECT_NE(qwen->config.chat_template.find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(llama->tokenizer->bos_id(), 128000);
  EXPECT_EQ(llama->tokenizer->eos_id(), 128001);
  EXPECT_EQ(llama->tokenizer->pad_id(), -1);
  EXPECT_EQ(llama->config.model_max_length, std::nullopt);  // 1e30: no limit
  EXPECT_EQ(llama->tokenizer->IdToToken(9906), "Hello");
}

}  // namespace
}  // namespace rl::tokenizer
