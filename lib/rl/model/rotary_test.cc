// Rotary tables: one copy per model, shared by every attention layer (layers.h, SharedRotary),
// and the angles they hold are the public definition's (RoFormer, rotate-half layout).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "rl/model/layers.h"
#include "rl/model/test_util.h"
#include "rl/model/transformer_module.h"

namespace rl::model {
namespace {

TEST(RotaryTest, EveryLayerSharesTheModelsOneTable) {
  ModelConfig c = testing::TinyConfig(Architecture::kQwen3);
  c.num_hidden_layers = 4;
  DecoderStack stack(c, TensorParallel{});
  const at::Tensor& first = stack->layers().front()->rotary().cos();
  EXPECT_EQ(first.size(0), c.context());
  EXPECT_EQ(first.size(1), c.head_width() / 2);
  for (const DecoderLayer& layer : stack->layers()) {
    EXPECT_EQ(&layer->rotary(), &stack->layers().front()->rotary());
  }
  // A move gives every layer the moved copy, still one, and leaves the old one as it was (a
  // clone still holding it is not changed under it).
  const SharedRotary before = std::make_shared<const Rotary>(stack->layers().front()->rotary());
  stack->MoveTables(at::kCPU);
  for (const DecoderLayer& layer : stack->layers()) {
    EXPECT_EQ(&layer->rotary(), &stack->layers().front()->rotary());
  }
  EXPECT_TRUE(at::equal(before->cos(), stack->layers().front()->rotary().cos()));
}

// cos(p * theta^(-2i/Dh)) at position p and frequency i, and x rotated as
// [x1 cos - x2 sin, x1 sin + x2 cos] over its two halves.
TEST(RotaryTest, AnglesAndRotationFollowTheDefinition) {
  ModelConfig c = testing::TinyConfig(Architecture::kQwen3);  // plain theta (the Llama one rescales)
  const Rotary rope(c);
  const int64_t dh = c.head_width(), half = dh / 2;
  for (int64_t p : {int64_t{0}, int64_t{1}, c.context() - 1}) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(p) * std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(dh));
      EXPECT_NEAR(rope.cos()[p][i].item<float>(), std::cos(angle), 1e-6) << p << " " << i;
    }
  }
  const at::Tensor x = at::arange(dh, at::kFloat).view({1, 1, 1, dh}) + 1;
  const int64_t p = 3;
  const at::Tensor y = rope.Apply(x, at::full({1, 1}, p, at::kLong));
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(p) * std::pow(c.rope_theta, -2.0 * static_cast<double>(i) / static_cast<double>(dh));
    const double x1 = static_cast<double>(i + 1), x2 = static_cast<double>(i + half + 1);
    EXPECT_NEAR(y[0][0][0][i].item<float>(), x1 * std::cos(angle) - x2 * std::sin(angle), 1e-4);
    EXPECT_NEAR(y[0][0][0][i + half].item<float>(), x1 * std::sin(angle) + x2 * std::cos(angle), 1e-4);
  }
}

}  // namespace
}  // namespace rl::model
