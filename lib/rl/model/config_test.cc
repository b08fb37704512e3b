#include "rl/model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace rl::model {
namespace {

ModelConfig Demo() {
  ModelConfig c;
  c.vocab_size = 15;
  c.d_model = 128;
  c.n_layers = 3;
  c.n_heads = 4;
  c.context = 32;
  c.positions = Positions::kRotary;
  c.norm = Norm::kRmsNorm;
  c.tie_embeddings = false;
  return c;
}

TEST(ModelConfigTest, JsonRoundTrip) {
  const ModelConfig c = Demo();
  auto back = ConfigFromString(ConfigToString(c));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c);
}

TEST(ModelConfigTest, OptionalFieldsTakeDefaults) {
  auto c = ConfigFromString(
      R"({"vocab_size": 15, "d_model": 64, "n_layers": 2, "n_heads": 4, "context": 32})");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->positions, Positions::kLearned);
  EXPECT_EQ(c->norm, Norm::kLayerNorm);
  EXPECT_TRUE(c->tie_embeddings);
  EXPECT_EQ(c->mlp_ratio, 4);
}

TEST(ModelConfigTest, BadConfigsAreConfigErrors) {
  const char* bad[] = {
      "not json",
      "[]",
      R"({"vocab_size": 15, "d_model": 64, "n_layers": 2, "n_heads": 4})",  // no context
      R"({"vocab_size": 15, "d_model": 64, "n_layers": 2, "n_heads": 5, "context": 8})",  // 64 % 5
      R"({"vocab_size": 15, "d_model": 64, "n_layers": 0, "n_heads": 4, "context": 8})",  // zero
      R"({"vocab_size": 15, "d_model": 64, "n_layers": 2, "n_heads": 4, "context": 8.5})",  // float
      R"({"vocab_size": 15, "d_model": 64, "n_layers": 2, "n_heads": 4, "context": 8, "positions": "alibi"})",
      R"({"vocab_size": 15, "d_model": 64, "n_layers": 2, "n_heads": 4, "context": 8, "colour": 1})",
      R"({"vocab_size": 15, "d_model": 12, "n_layers": 2, "n_heads": 4, "context": 8, "positions": "rotary"})",
  };
  for (const char* text : bad) {
    EXPECT_EQ(ConfigFromString(text).status().code(), Code::kConfig) << text;
  }
}

}  // namespace
}  // namespace rl::model
