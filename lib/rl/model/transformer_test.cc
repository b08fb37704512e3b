#include "rl/model/transformer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>

#include "rl/model/test_util.h"

namespace rl::model {
namespace {

using testing::TinyConfig;

TEST(TransformerTest, ForwardGivesLogitsPerPosition) {
  auto model = Transformer::Create(TinyConfig(Positions::kRotary), 1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto logits = model->Forward(at::ones({3, 5}, at::kLong));
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  EXPECT_EQ(logits->sizes(), (std::vector<int64_t>{3, 5, 15}));
}

TEST(TransformerTest, LaterTokensDoNotChangeEarlierLogits) {
  auto model = Transformer::Create(TinyConfig(Positions::kLearned), 1);
  ASSERT_TRUE(model.ok());
  testing::ScaleWeights(&*model, 3.0);
  const at::Tensor a = at::tensor({1, 4, 5, 6, 7}, at::kLong).unsqueeze(0);
  const at::Tensor b = at::tensor({1, 4, 5, 9, 9}, at::kLong).unsqueeze(0);
  const at::Tensor la = *model->Forward(a), lb = *model->Forward(b);
  EXPECT_TRUE(at::allclose(la.narrow(1, 0, 3), lb.narrow(1, 0, 3), 0, 1e-6));
  EXPECT_FALSE(at::allclose(la.narrow(1, 3, 2), lb.narrow(1, 3, 2), 0, 1e-3));
}

TEST(TransformerTest, SameSeedSameWeights) {
  auto a = Transformer::Create(TinyConfig(Positions::kRotary), 5);
  auto b = Transformer::Create(TinyConfig(Positions::kRotary), 5);
  auto c = Transformer::Create(TinyConfig(Positions::kRotary), 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto pa = a->NamedParameters(), pb = b->NamedParameters(), pc = c->NamedParameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(pa[i].second.equal(pb[i].second)) << pa[i].first;
  EXPECT_FALSE(pa[0].second.equal(pc[0].second));
}

TEST(TransformerTest, ParameterNamesFollowTheLayout) {
  auto tied = Transformer::Create(TinyConfig(Positions::kRotary, Norm::kRmsNorm, true), 1);
  auto untied = Transformer::Create(TinyConfig(Positions::kLearned, Norm::kLayerNorm, false), 1);
  ASSERT_TRUE(tied.ok() && untied.ok());
  std::vector<std::string> names;
  for (const auto& [name, t] : untied->NamedParameters()) names.push_back(name);
  const std::vector<std::string> expected_front = {
      "tok_emb.weight",      "pos_emb.weight",           "blocks.0.norm1.weight",
      "blocks.0.norm1.bias", "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias"};
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 6), expected_front);
  EXPECT_EQ(names.back(), "lm_head.weight");
  // Tied, rotary, RMSNorm: no pos_emb, no lm_head, no norm biases.
  // 1 + 2 layers * (norm1 + qkv 2 + proj 2 + norm2 + fc 2 + proj 2) + norm_f = 22
  EXPECT_EQ(tied->NamedParameters().size(), 22u);
}

TEST(TransformerTest, ParameterCountMatchesTheModel) {
  for (Positions p : {Positions::kLearned, Positions::kRotary}) {
    for (Norm n : {Norm::kLayerNorm, Norm::kRmsNorm}) {
      for (bool tied : {true, false}) {
        const ModelConfig c = TinyConfig(p, n, tied);
        auto model = Transformer::Create(c, 1);
        ASSERT_TRUE(model.ok());
        int64_t numel = 0;
        for (const at::Tensor& t : model->Parameters()) numel += t.numel();
        auto count = ParameterCount(c);
        ASSERT_TRUE(count.ok());
        EXPECT_EQ(*count, numel);
      }
    }
  }
  ModelConfig huge = TinyConfig(Positions::kRotary);
  huge.d_model = huge.vocab_size = huge.n_layers = 1 << 24;
  huge.n_heads = 1;
  EXPECT_EQ(ParameterCount(huge).status().code(), Code::kConfig);
}

TEST(TransformerTest, CloneIsIndependent) {
  auto model = Transformer::Create(TinyConfig(Positions::kRotary), 1);
  ASSERT_TRUE(model.ok());
  auto copy = model->Clone();
  ASSERT_TRUE(copy.ok());
  const at::Tensor x = at::ones({1, 4}, at::kLong);
  EXPECT_TRUE(model->Forward(x)->equal(*copy->Forward(x)));
  testing::ScaleWeights(&*copy, 2.0);
  EXPECT_FALSE(model->Forward(x)->equal(*copy->Forward(x)));
}

TEST(TransformerTest, LoadRejectsMismatchesAndChangesNothing) {
  auto model = Transformer::Create(TinyConfig(Positions::kRotary), 1);
  ASSERT_TRUE(model.ok());
  NamedTensors params = model->NamedParameters();
  const at::Tensor before = params[0].second.clone();
  NamedTensors bad;
  for (const auto& [name, t] : params) bad.emplace_back(name, at::zeros_like(t));
  bad.back().second = at::zeros({1});
  EXPECT_EQ(model->LoadNamedParameters(bad).code(), Code::kDataError);
  EXPECT_TRUE(model->NamedParameters()[0].second.equal(before));
  bad.pop_back();
  EXPECT_EQ(model->LoadNamedParameters(bad).code(), Code::kDataError);
}

TEST(TransformerTest, InputsOutsideTheModelAreInvalidArguments) {
  auto model = Transformer::Create(TinyConfig(Positions::kLearned), 1);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->Forward(at::ones({1, 17}, at::kLong)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::full({1, 2}, 15, at::kLong)).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::ones({1, 2})).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::Tensor()).status().code(), Code::kInvalidArgument);
}

// A 1-layer model fits a fixed batch: the loss falls well within 50 Adam steps.
TEST(TransformerTest, LossFallsOnAFixedBatch) {
  ModelConfig c = TinyConfig(Positions::kRotary);
  c.n_layers = 1;
  auto model = Transformer::Create(c, 1);
  ASSERT_TRUE(model.ok());
  at::manual_seed(0);
  const at::Tensor batch = at::randint(3, 15, {8, 12}, at::kLong);
  const at::Tensor inputs = batch.narrow(1, 0, 11), targets = batch.narrow(1, 1, 11);
  torch::optim::Adam adam(model->Parameters(), torch::optim::AdamOptions(1e-2));
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    auto logits = model->Forward(inputs);
    ASSERT_TRUE(logits.ok());
    const at::Tensor loss =
        at::cross_entropy_loss(logits->reshape({-1, 15}), targets.reshape({-1}));
    adam.zero_grad();
    loss.backward();
    adam.step();
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

}  // namespace
}  // namespace rl::model
