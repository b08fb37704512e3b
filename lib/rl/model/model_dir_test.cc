// ModelDir on the demo directory and on a directory with the real Qwen3 tokenizer files (from
// npm; skipped, saying why, without them), and its refusals.
#include "rl/model/model_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rl/model/test_util.h"
#include "rl/model/tokenizer/reference_util.h"

namespace rl::model {
namespace {

namespace fs = std::filesystem;
const std::string kDemoDir = std::string(RL_SOURCE_DIR) + "/share/models/addition-tiny";

// A fresh directory holding a copy of `from`'s files, config.json replaced by `config` if given.
std::string CopyDir(const std::string& from, const std::string& name, const std::string& config = "") {
  const std::string dir = ::testing::TempDir() + "/model-dir-" + name + "-" + std::to_string(getpid());
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(from)) fs::copy(e.path(), dir + "/" + e.path().filename().string());
  if (!config.empty()) std::ofstream(dir + "/config.json") << config;
  return dir;
}

TEST(ModelDirTest, OpensTheDemoDirectoryWithItsSpecialTokens) {
  auto m = OpenModelDir(kDemoDir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(ConfigToString(m->config), ConfigToString(DemoConfig()));
  EXPECT_EQ(m->bos_id, 1);
  EXPECT_EQ(m->eos_id, 2);
  EXPECT_EQ(m->pad_id, 0);
  EXPECT_FALSE(m->has_weights);
  auto model = InitialModel(*m, 7);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  EXPECT_EQ(model->config().hidden_size, 128);
}

TEST(ModelDirTest, TakesQwen3sSpecialTokensFromTokenizerConfig) {
  const std::string why = tokenizer::testing::ReferenceMissing();
  if (!why.empty()) GTEST_SKIP() << why;
  ModelConfig c = testing::TinyConfig(Architecture::kQwen3);
  c.vocab_size = 151936;  // as Qwen3's config.json: above the tokenizer's 151669 ids
  const std::string dir = CopyDir(tokenizer::testing::ModelDir("qwen3"), "qwen3", ConfigToString(c));
  auto m = OpenModelDir(dir);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->bos_id, -1);
  EXPECT_EQ(m->eos_id, 151645);  // <|im_end|>
  EXPECT_EQ(m->pad_id, 151643);  // <|endoftext|>
  fs::remove_all(dir);
}

TEST(ModelDirTest, RefusesATokenizerLargerThanTheEmbedding) {
  ModelConfig c = DemoConfig();
  c.vocab_size = 12;
  const std::string dir = CopyDir(kDemoDir, "small-vocab", ConfigToString(c));
  auto m = OpenModelDir(dir);
  EXPECT_EQ(m.status().code(), Code::kConfig);
  EXPECT_NE(m.status().message().find("vocab_size is 12"), std::string::npos) << m.status().message();
  fs::remove_all(dir);
}

TEST(ModelDirTest, RefusesAnEosTokenTheTokenizerDoesNotHave) {
  const std::string dir = CopyDir(kDemoDir, "bad-eos");
  std::ofstream(dir + "/tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  auto m = OpenModelDir(dir);
  EXPECT_EQ(m.status().code(), Code::kConfig);
  EXPECT_NE(m.status().message().find("'<|im_end|>'"), std::string::npos) << m.status().message();
  fs::remove_all(dir);
}

TEST(ModelDirTest, SaysWhatIsMissing) {
  EXPECT_EQ(OpenModelDir("/nonexistent/model").status().code(), Code::kNotFound);
  const std::string dir = CopyDir(kDemoDir, "no-tokenizer");
  fs::remove(dir + "/tokenizer.json");
  auto m = OpenModelDir(dir);
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("tokenizer.json"), std::string::npos) << m.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace rl::model
