#include "rl/model/tokenizer/load.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <unistd.h>

namespace rl::tokenizer {
namespace {

TEST(TokenizerConfigTest, ReadsTokensAsStringsOrAddedTokenObjects) {
  auto c = ParseTokenizerConfig(R"({"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
      "eos_token": "</s>", "pad_token": null, "add_bos_token": true, "model_max_length": 4096})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->bos_token, "<s>");
  EXPECT_EQ(c->eos_token, "</s>");
  EXPECT_EQ(c->pad_token, "");
  EXPECT_TRUE(c->add_bos_token);
  EXPECT_FALSE(c->add_eos_token);
  EXPECT_EQ(c->model_max_length, 4096);
}

TEST(TokenizerConfigTest, TakesTheDefaultOfANamedTemplateList) {
  auto c = ParseTokenizerConfig(R"({"chat_template": [{"name": "tool_use", "template": "T"},
      {"name": "default", "template": "D"}]})");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->chat_template, "D");
  EXPECT_EQ(ParseTokenizerConfig(R"({"chat_template": "S"})")->chat_template, "S");
}

TEST(TokenizerConfigTest, HugeModelMaxLengthMeansNoLimit) {
  auto c = ParseTokenizerConfig(R"({"model_max_length": 1000000000000000019884624838656})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_max_length, std::nullopt);
}

TEST(TokenizerConfigTest, WrongTypesAreOneLineConfigErrors) {
  const std::pair<const char*, const char*> cases[] = {
      {"[]", "not a JSON object"},
      {"{\"bos_token\": 5}", "bos_token is neither a string"},
      {"{\"add_bos_token\": \"yes\"}", "add_bos_token is not a boolean"},
      {"{\"chat_template\": [{\"name\": \"other\", \"template\": \"x\"}]}", "no template named \"default\""},
      {"{\"chat_template\": 3}", "chat_template is neither"},
      {"{\"model_max_length\": \"big\"}", "model_max_length is not a number"},
      {"{\"model_max_length\": 0}", "model_max_length is below 1"},
  };
  for (const auto& [text, message] : cases) {
    auto c = ParseTokenizerConfig(text);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), Code::kConfig);
    EXPECT_NE(c.status().message().find(message), std::string::npos) << c.status().message();
  }
}

class LoadTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/load-tokenizer-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& text) { std::ofstream(dir_ + "/" + name) << text; }
  std::string dir_;
};

TEST_F(LoadTokenizerTest, MissingTokenizerJsonIsNotFound) {
  auto t = LoadTokenizer(dir_);
  EXPECT_EQ(t.status().code(), Code::kNotFound);
}

TEST_F(LoadTokenizerTest, AGarbageSentencePieceModelIsAConfigErrorSayingSo) {
  Write("tokenizer.model", "not read");
  auto t = LoadTokenizer(dir_);
  EXPECT_EQ(t.status().code(), Code::kConfig);
  EXPECT_NE(t.status().message().find("SentencePiece"), std::string::npos);
}

TEST_F(LoadTokenizerTest, ErrorsNameTheFile) {
  Write("tokenizer.json", R"({"model": {"type": "Unigram"}})");
  auto t = LoadTokenizer(dir_);
  EXPECT_EQ(t.status().code(), Code::kConfig);
  EXPECT_EQ(t.status().message(), dir_ + "/tokenizer.json: model type 'Unigram' is not supported (only BPE)");
  Write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}})");
  Write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  t = LoadTokenizer(dir_);
  EXPECT_EQ(t.status().code(), Code::kConfig);
  EXPECT_NE(t.status().message().find("special token '</s>' is not in the vocabulary"), std::string::npos)
      << t.status().message();
}

}  // namespace
}  // namespace rl::tokenizer
