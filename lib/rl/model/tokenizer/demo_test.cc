// share/models/addition-tiny/tokenizer.json is the arithmetic demo's CharTokenizer as a Hugging
// Face file: our loader gives CharTokenizer's ids for every demo string, and so does Hugging Face
// tokenizers itself on a sample of them (skipped, saying why, without the npm packages). Its
// post-processor puts <bos> first when special tokens are asked for, as Llama 3's does.
#include <gtest/gtest.h>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "rl/model/tokenizer.h"
#include "rl/model/tokenizer/load.h"
#include "rl/model/tokenizer/reference_util.h"
#include "rl/task/addition.h"

namespace rl::tokenizer {
namespace {

const std::string kDemoDir = std::string(RL_SOURCE_DIR) + "/share/models/addition-tiny";

LoadedTokenizer LoadDemo() {
  auto t = LoadTokenizer(kDemoDir);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? std::move(*t) : LoadedTokenizer{};
}

TEST(DemoTokenizerTest, GivesCharTokenizersIdsForEveryProblemAndAnswer) {
  LoadedTokenizer demo = LoadDemo();
  ASSERT_NE(demo.tokenizer, nullptr);
  model::CharTokenizer chars;
  size_t checked = 0;
  for (int a = 0; a < 1000; ++a) {
    for (int b = 0; b < 1000; ++b) {
      const std::string text = task::AdditionPrompt(a, b) + task::AdditionAnswer(a + b);
      auto ours = demo.tokenizer->Encode(text);
      auto want = chars.Encode(text);
      ASSERT_TRUE(ours.ok() && want.ok()) << text;
      ASSERT_EQ(*ours, *want) << text;
      ASSERT_EQ(*demo.tokenizer->Decode(*ours), text);
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1000000u);
}

TEST(DemoTokenizerTest, AgreesWithCharTokenizerOnEveryIdAndSpecial) {
  LoadedTokenizer demo = LoadDemo();
  ASSERT_NE(demo.tokenizer, nullptr);
  model::CharTokenizer chars;
  const model::Tokenizer& t = *demo.tokenizer;
  EXPECT_EQ(t.vocab_size(), chars.vocab_size());
  EXPECT_EQ(t.pad_id(), chars.pad_id());
  EXPECT_EQ(t.bos_id(), chars.bos_id());
  EXPECT_EQ(t.eos_id(), chars.eos_id());
  for (int64_t id = 0; id < chars.vocab_size(); ++id) {
    EXPECT_EQ(t.IdToToken(id), chars.IdToToken(id)) << id;
    EXPECT_EQ(t.TokenToId(*chars.IdToToken(id)), id);
    EXPECT_EQ(t.IsSpecial(id), chars.IsSpecial(id)) << id;
  }
  const std::vector<int64_t> ids = {1, 3, 13, 4, 14, 4, 2, 0};
  EXPECT_EQ(*t.DecodeWith(ids, {false}), *chars.DecodeWith(ids, {false}));
  EXPECT_EQ(*t.DecodeWith(ids, {false}), "<bos>0+1=1<eos><pad>");
  EXPECT_EQ(*t.Decode(ids), "0+1=1");
  EXPECT_EQ(demo.config.bos_token, "<bos>");
  EXPECT_EQ(demo.config.model_max_length, 32);
}

TEST(DemoTokenizerTest, RefusesACharacterOutsideTheVocabulary) {
  // Hugging Face tokenizers drops it silently (no unk_token); we say so.
  LoadedTokenizer demo = LoadDemo();
  ASSERT_NE(demo.tokenizer, nullptr);
  auto ids = demo.tokenizer->Encode("1+x");
  EXPECT_EQ(ids.status().code(), Code::kDataError);
  EXPECT_NE(ids.status().message().find("'x'"), std::string::npos) << ids.status().message();
}

TEST(DemoTokenizerTest, HuggingFaceTokenizersGivesTheSameIdsOnTheFile) {
  const std::string why = testing::ReferenceMissing();
  if (!why.empty()) GTEST_SKIP() << why;
  LoadedTokenizer demo = LoadDemo();
  ASSERT_NE(demo.tokenizer, nullptr);
  model::CharTokenizer chars;
  const std::string corpus = ::testing::TempDir() + "/demo-corpus-" + std::to_string(getpid()) + ".txt";
  std::vector<std::string> lines;
  for (const auto& p : task::MakeProblems(500, 11)) lines.push_back(p.prompt + p.answer);
  for (const auto& p : task::HeldOutSet(100)) lines.push_back(p.prompt);
  lines.push_back("999+999=1998");
  lines.push_back("0000000000000000+=");
  {
    std::ofstream out(corpus);
    for (const auto& l : lines) out << l << '\n';
  }
  bool ok = false;
  const std::string out = testing::RunCommand("node '" + std::string(RL_SOURCE_DIR) + "/tests/tokenizer/reference.js' '" +
                                              testing::NpmDir() + "' '" + kDemoDir + "/tokenizer.json' '" + corpus + "' 1", &ok);
  std::remove(corpus.c_str());
  ASSERT_TRUE(ok) << out;
  std::istringstream in(out);
  size_t n = 0;
  for (std::string line; std::getline(in, line) && n < lines.size(); ++n) {
    const auto ref = nlohmann::json::parse(line);
    // With special tokens asked for, the file's post-processor puts <bos> first.
    std::vector<int64_t> want = *chars.Encode(lines[n]);
    want.insert(want.begin(), chars.bos_id());
    EXPECT_EQ(ref["ids"].get<std::vector<int64_t>>(), want) << lines[n];
    EXPECT_EQ(*demo.tokenizer->EncodeWith(lines[n], {true, false}), want) << lines[n];
    EXPECT_EQ(ref["decoded"].get<std::string>(), "<bos>" + lines[n]);  // the reference keeps specials
  }
  EXPECT_EQ(n, lines.size());
}

}  // namespace
}  // namespace rl::tokenizer
