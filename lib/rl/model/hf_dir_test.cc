#include "rl/model/hf_dir.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "rl/core/fs.h"
#include "rl/model/safetensors.h"
#include "rl/model/test_util.h"

namespace rl::model {
namespace {

namespace fs = std::filesystem;
using testing::TinyConfig;

class HfDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "/hf_dir_test." + std::to_string(::getpid());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // A saved model of `config` (random weights) at root_/name.
  std::string Saved(const ModelConfig& config, const std::string& name, DType dtype = DType::kF32) {
    auto model = Transformer::Create(config, 11);
    EXPECT_TRUE(model.ok());
    testing::RandomizeWeights(&*model, 3);
    const std::string dir = root_ + "/" + name;
    HfSaveOptions o;
    o.dtype = dtype;
    EXPECT_TRUE(SaveHfModel(dir, *model, o).ok());
    return dir;
  }

  // Splits dir's model.safetensors into two shards and an index.
  void Shard(const std::string& dir) {
    auto contents = ReadSafetensorsFile(dir + "/model.safetensors");
    ASSERT_TRUE(contents.ok());
    NamedTensors a, b;
    nlohmann::json map;
    for (size_t i = 0; i < contents->tensors.size(); ++i) {
      const bool first = i < contents->tensors.size() / 2;
      (first ? a : b).push_back(contents->tensors[i]);
      map[contents->tensors[i].first] =
          first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    ASSERT_TRUE(WriteSafetensorsFile(dir + "/model-00001-of-00002.safetensors", a, {}).ok());
    ASSERT_TRUE(WriteSafetensorsFile(dir + "/model-00002-of-00002.safetensors", b, {}).ok());
    const nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", map}};
    ASSERT_TRUE(WriteFileAtomic(dir + "/model.safetensors.index.json", index.dump()).ok());
    fs::remove(dir + "/model.safetensors");
  }

  // LoadHfModel(dir) fails with `code` and a one-line message holding `needle`.
  static void ExpectError(const std::string& dir, Code code, const std::string& needle) {
    auto m = LoadHfModel(dir);
    ASSERT_FALSE(m.ok()) << needle;
    EXPECT_EQ(m.status().code(), code) << m.status().ToString();
    EXPECT_NE(m.status().message().find(needle), std::string::npos)
        << m.status().message() << " lacks " << needle;
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
  }

  std::string root_;
};

const at::Tensor kTokens = at::tensor({1, 4, 5, 13, 6, 7, 14, 3}, at::kLong).unsqueeze(0);

TEST_F(HfDirTest, ReloadGivesIdenticalLogits) {
  for (Architecture a : {Architecture::kLlama, Architecture::kQwen2, Architecture::kQwen3}) {
    for (bool tied : {true, false}) {
      auto model = Transformer::Create(TinyConfig(a, tied), 5);
      ASSERT_TRUE(model.ok());
      testing::RandomizeWeights(&*model, 6);
      const std::string dir = root_ + "/m";
      // The second round replaces the first; a trailing slash names the same directory.
      ASSERT_TRUE(SaveHfModel(tied ? dir + "/" : dir, *model).ok());
      EXPECT_FALSE(fs::exists(dir + ".tmp"));
      EXPECT_FALSE(fs::exists(dir + "/.tmp"));
      auto back = LoadHfModel(dir);
      ASSERT_TRUE(back.ok()) << back.status().ToString();
      EXPECT_EQ(back->config(), model->config());
      EXPECT_TRUE(back->Forward(kTokens)->equal(*model->Forward(kTokens)));
      EXPECT_EQ(fs::exists(dir + "/model.safetensors"), true);
    }
  }
}

TEST_F(HfDirTest, WritesWhatTransformersExpects) {
  const std::string dir = Saved(TinyConfig(Architecture::kQwen3), "q", DType::kBF16);
  auto contents = ReadSafetensorsFile(dir + "/model.safetensors");
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->metadata.at("format"), "pt");
  for (const auto& [name, t] : contents->tensors) EXPECT_EQ(t.scalar_type(), at::kBFloat16) << name;
  for (const auto& [name, t] : contents->tensors) EXPECT_NE(name, "lm_head.weight");  // tied
  auto text = ReadFile(dir + "/config.json");
  ASSERT_TRUE(text.ok());
  const nlohmann::json j = nlohmann::json::parse(*text);
  EXPECT_EQ(j.at("torch_dtype"), "bfloat16");
  EXPECT_EQ(j.at("model_type"), "qwen3");
  EXPECT_EQ(j.at("head_dim"), 16);
}

TEST_F(HfDirTest, LoadsShardsAndConvertsDtypes) {
  const std::string dir = Saved(TinyConfig(Architecture::kLlama, false), "s", DType::kBF16);
  auto single = LoadHfModel(dir);
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  EXPECT_EQ(single->dtype(), DType::kF32);
  Shard(dir);
  auto sharded = LoadHfModel(dir);
  ASSERT_TRUE(sharded.ok()) << sharded.status().ToString();
  EXPECT_TRUE(sharded->Forward(kTokens)->equal(*single->Forward(kTokens)));
  HfLoadOptions o;
  o.dtype = DType::kBF16;
  o.context = 8;
  auto bf16 = LoadHfModel(dir, o);
  ASSERT_TRUE(bf16.ok()) << bf16.status().ToString();
  EXPECT_EQ(bf16->dtype(), DType::kBF16);
  EXPECT_EQ(bf16->config().context(), 8);
  const at::Tensor eight = kTokens.narrow(1, 0, 8);
  const double scale = single->Forward(eight)->abs().max().item<double>();
  EXPECT_LT((*bf16->Forward(eight) - *single->Forward(eight)).abs().max().item<double>(),
            0.05 * scale);
}

TEST_F(HfDirTest, CopiesTokenizerFiles) {
  const std::string src = root_ + "/tok";
  fs::create_directories(src);
  ASSERT_TRUE(WriteFileAtomic(src + "/tokenizer.json", "{\"model\": {}}").ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/generation_config.json", "{}").ok());
  ASSERT_TRUE(WriteFileAtomic(src + "/unrelated.txt", "x").ok());
  auto model = Transformer::Create(TinyConfig(), 1);
  ASSERT_TRUE(model.ok());
  HfSaveOptions o;
  o.tokenizer_from = src;
  ASSERT_TRUE(SaveHfModel(root_ + "/out", *model, o).ok());
  EXPECT_EQ(*ReadFile(root_ + "/out/tokenizer.json"), "{\"model\": {}}");
  EXPECT_TRUE(fs::exists(root_ + "/out/generation_config.json"));
  EXPECT_FALSE(fs::exists(root_ + "/out/unrelated.txt"));
  EXPECT_FALSE(fs::exists(root_ + "/out/tokenizer_config.json"));
  o.tokenizer_from = root_ + "/nowhere";
  EXPECT_EQ(SaveHfModel(root_ + "/out2", *model, o).code(), Code::kNotFound);
}

TEST_F(HfDirTest, MissingFilesAreDataErrors) {
  ExpectError(root_ + "/empty", Code::kDataError, "no config.json");
  const std::string dir = Saved(TinyConfig(), "m");
  fs::remove(dir + "/model.safetensors");
  ExpectError(dir, Code::kDataError, "no model.safetensors or model.safetensors.index.json");
  const std::string sharded = Saved(TinyConfig(), "s");
  Shard(sharded);
  fs::remove(sharded + "/model-00002-of-00002.safetensors");
  ExpectError(sharded, Code::kDataError, "model-00002-of-00002.safetensors: missing");
}

TEST_F(HfDirTest, BadConfigIsAConfigErrorNamingTheFile) {
  const std::string dir = Saved(TinyConfig(), "m");
  ASSERT_TRUE(
      WriteFileAtomic(dir + "/config.json", R"({"architectures": ["GPT2LMHeadModel"]})").ok());
  ExpectError(dir, Code::kConfig, "config.json: model config: unsupported architecture");
}

TEST_F(HfDirTest, TruncatedShardIsCorruptionNamingTheFile) {
  const std::string dir = Saved(TinyConfig(), "m");
  Shard(dir);
  const std::string shard = dir + "/model-00001-of-00002.safetensors";
  fs::resize_file(shard, fs::file_size(shard) - 10);
  ExpectError(dir, Code::kCorruption, "model-00001-of-00002.safetensors");
  // Far too short for the config: refused before the model is built.
  const std::string single = Saved(TinyConfig(), "single");
  fs::resize_file(single + "/model.safetensors", 100);
  ExpectError(single, Code::kDataError, "too few for the config");
}

// Rewrites dir's model.safetensors with `edit` applied to its tensors.
void EditWeights(const std::string& dir, const std::function<void(NamedTensors*)>& edit) {
  auto contents = ReadSafetensorsFile(dir + "/model.safetensors");
  ASSERT_TRUE(contents.ok());
  edit(&contents->tensors);
  ASSERT_TRUE(WriteSafetensorsFile(dir + "/model.safetensors", contents->tensors, {}).ok());
}

TEST_F(HfDirTest, WrongTensorsAreDataErrorsNamingTensorAndFile) {
  const std::string dir = Saved(TinyConfig(Architecture::kQwen2), "m");
  const std::string k = "model.layers.1.self_attn.k_proj.weight";
  EditWeights(dir, [&](NamedTensors* t) {
    for (auto& [name, v] : *t) {
      if (name == k) v = at::zeros({32, 32});
    }
  });
  ExpectError(
      dir, Code::kDataError,
      "model.safetensors: tensor '" + k + "' has shape [32, 32], the config needs [16, 32]");
  EditWeights(dir, [&](NamedTensors* t) {
    for (auto& [name, v] : *t) {
      if (name == k) v = at::zeros({16, 32}, at::kLong);
    }
  });
  ExpectError(dir, Code::kDataError,
              "tensor '" + k + "' is Long; weights must be F32, F16 or BF16");
  EditWeights(dir, [&](NamedTensors* t) {
    t->erase(std::remove_if(t->begin(), t->end(), [&](const auto& p) { return p.first == k; }),
             t->end());
  });
  ExpectError(dir, Code::kDataError, "tensor '" + k + "' missing");
  EditWeights(dir, [&](NamedTensors* t) {
    t->emplace_back("model.layers.9.mlp.up_proj.weight", at::zeros({1}));
  });
  ExpectError(dir, Code::kDataError, "unexpected tensor 'model.layers.9.mlp.up_proj.weight'");
}

TEST_F(HfDirTest, ToleratesWhatOldExportsCarry) {
  const std::string dir = Saved(TinyConfig(Architecture::kLlama, true), "m");
  EditWeights(dir, [&](NamedTensors* t) {
    t->emplace_back("model.layers.0.self_attn.rotary_emb.inv_freq", at::ones({4}));
    t->emplace_back("lm_head.weight", at::zeros({15, 32}));  // tied: ignored
  });
  auto m = LoadHfModel(dir);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
}

}  // namespace
}  // namespace rl::model
