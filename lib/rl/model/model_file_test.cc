#include "rl/model/model_file.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#include "rl/model/safetensors.h"
#include "rl/model/test_util.h"

namespace rl::model {
namespace {

using testing::TinyConfig;

TEST(ModelFileTest, StateDictRoundTripIsBitExact) {
  for (bool tied : {true, false}) {
    auto model = Transformer::Create(TinyConfig(Architecture::kQwen2, tied), 9);
    ASSERT_TRUE(model.ok());
    auto bytes = EncodeModel(*model, 42);
    ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
    auto loaded = DecodeModel(*bytes);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(loaded->version, 42u);
    EXPECT_EQ(loaded->model.config(), model->config());
    const auto a = model->NamedParameters(), b = loaded->model.NamedParameters();
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].first, b[i].first);
      ASSERT_EQ(a[i].second.nbytes(), b[i].second.nbytes());
      EXPECT_EQ(std::memcmp(a[i].second.data_ptr(), b[i].second.data_ptr(), a[i].second.nbytes()),
                0)
          << a[i].first;
    }
    const at::Tensor x = at::tensor({1, 4, 5, 13, 6}, at::kLong).unsqueeze(0);
    EXPECT_TRUE(model->Forward(x)->equal(*loaded->model.Forward(x)));
  }
}

TEST(ModelFileTest, TensorsCarryHuggingFaceNamesAndTheConfigIsAConfigJson) {
  auto model = Transformer::Create(TinyConfig(Architecture::kQwen3, false), 2);
  ASSERT_TRUE(model.ok());
  auto bytes = EncodeModel(*model, 7);
  ASSERT_TRUE(bytes.ok());
  auto contents = DecodeSafetensors(*bytes);
  ASSERT_TRUE(contents.ok());
  EXPECT_EQ(contents->tensors.front().first, "model.embed_tokens.weight");
  EXPECT_EQ(contents->tensors.back().first, "lm_head.weight");
  auto config = ConfigFromString(contents->metadata.at("rl_config"));
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(*config, model->config());
  EXPECT_NE(contents->metadata.at("rl_config").find("\"Qwen3ForCausalLM\""), std::string::npos);
}

TEST(ModelFileTest, Bfloat16ModelsDecodeAsBfloat16) {
  auto model = Transformer::Create(TinyConfig(Architecture::kLlama), 2, DType::kBF16);
  ASSERT_TRUE(model.ok());
  auto bytes = EncodeModel(*model, 1);
  ASSERT_TRUE(bytes.ok());
  auto loaded = DecodeModel(*bytes);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->model.dtype(), DType::kBF16);
  const at::Tensor x = at::tensor({1, 4, 5}, at::kLong).unsqueeze(0);
  EXPECT_TRUE(model->Forward(x)->equal(*loaded->model.Forward(x)));
}

TEST(ModelFileTest, LoadWeightsIntoAnExistingModel) {
  const ModelConfig c = TinyConfig(Architecture::kLlama);
  auto source = Transformer::Create(c, 1);
  auto target = Transformer::Create(c, 2);
  ASSERT_TRUE(source.ok() && target.ok());
  const std::string path = ::testing::TempDir() + "/model_file_test.safetensors";
  ASSERT_TRUE(SaveModelFile(path, *source, 3).ok());
  auto file = LoadModelFile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->version, 3u);
  auto bytes = EncodeModel(*source, 3);
  ASSERT_TRUE(bytes.ok());
  auto version = LoadModelWeights(*bytes, &*target);
  ASSERT_TRUE(version.ok()) << version.status().ToString();
  EXPECT_EQ(*version, 3u);
  const at::Tensor x = at::ones({1, 3}, at::kLong);
  EXPECT_TRUE(source->Forward(x)->equal(*target->Forward(x)));
}

TEST(ModelFileTest, ConfigMismatchIsDataError) {
  auto small = Transformer::Create(TinyConfig(Architecture::kLlama), 1);
  ModelConfig other_config = TinyConfig(Architecture::kLlama);
  other_config.num_hidden_layers = 1;
  auto other = Transformer::Create(other_config, 1);
  ASSERT_TRUE(small.ok() && other.ok());
  auto bytes = EncodeModel(*small, 1);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(LoadModelWeights(*bytes, &*other).status().code(), Code::kDataError);
}

TEST(ModelFileTest, MissingOrBadMetadataIsCorruption) {
  auto model = Transformer::Create(TinyConfig(Architecture::kLlama), 1);
  ASSERT_TRUE(model.ok());
  const std::string config = ConfigToString(model->config());
  const Metadata bad[] = {{},
                          {{"rl_config", config}},
                          {{"rl_config", "{"}, {"rl_version", "1"}},
                          {{"rl_config", config}, {"rl_version", "-1"}},
                          {{"rl_config", config}, {"rl_version", "99999999999999999999999"}}};
  for (const Metadata& m : bad) {
    auto bytes = EncodeSafetensors(model->NamedParameters(), m);
    ASSERT_TRUE(bytes.ok());
    EXPECT_EQ(DecodeModel(*bytes).status().code(), Code::kCorruption);
  }
  // A config far larger than the file is refused before anything is allocated.
  ModelConfig huge = model->config();
  huge.vocab_size = 1 << 24;
  huge.hidden_size = 1 << 16;
  huge.num_attention_heads = 1 << 8;
  huge.num_key_value_heads = 1 << 8;
  auto huge_bytes = EncodeSafetensors(model->NamedParameters(),
                                      {{"rl_config", ConfigToString(huge)}, {"rl_version", "1"}});
  ASSERT_TRUE(huge_bytes.ok());
  EXPECT_EQ(DecodeModel(*huge_bytes).status().code(), Code::kDataError);
  // The right metadata over the wrong tensors.
  auto bytes =
      EncodeSafetensors({{"x", at::ones({1})}}, {{"rl_config", config}, {"rl_version", "1"}});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(DecodeModel(*bytes).status().code(), Code::kDataError);
}

}  // namespace
}  // namespace rl::model
