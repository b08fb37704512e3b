#include "rl/model/transformer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/optim/adam.h>

#include "rl/model/test_util.h"

namespace rl::model {
namespace {

using testing::TinyConfig;

TEST(TransformerTest, ForwardGivesLogitsPerPosition) {
  auto model = Transformer::Create(TinyConfig(Architecture::kLlama), 1);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto logits = model->Forward(at::ones({3, 5}, at::kLong));
  ASSERT_TRUE(logits.ok()) << logits.status().ToString();
  EXPECT_EQ(logits->sizes(), (std::vector<int64_t>{3, 5, 15}));
}

TEST(TransformerTest, LaterTokensDoNotChangeEarlierLogits) {
  auto model = Transformer::Create(TinyConfig(Architecture::kQwen2), 1);
  ASSERT_TRUE(model.ok());
  testing::ScaleWeights(&*model, 3.0);
  const at::Tensor a = at::tensor({1, 4, 5, 6, 7}, at::kLong).unsqueeze(0);
  const at::Tensor b = at::tensor({1, 4, 5, 9, 9}, at::kLong).unsqueeze(0);
  const at::Tensor la = *model->Forward(a), lb = *model->Forward(b);
  EXPECT_TRUE(at::allclose(la.narrow(1, 0, 3), lb.narrow(1, 0, 3), 0, 1e-6));
  EXPECT_FALSE(at::allclose(la.narrow(1, 3, 2), lb.narrow(1, 3, 2), 0, 1e-3));
}

TEST(TransformerTest, MaskedTokenLogprobsEqualTheFullLogSoftmaxWhereMaskedAndGradientsFlow) {
  for (bool tied : {true, false}) {
    auto model = Transformer::Create(TinyConfig(Architecture::kQwen3, tied), 2);
    ASSERT_TRUE(model.ok());
    const at::Tensor tokens = at::tensor({1, 4, 5, 6, 7, 2, 1, 9, 8, 3, 0, 0}, at::kLong).view({2, 6});
    const at::Tensor mask = at::tensor({0, 0, 1, 1, 1, 0, 0, 1, 1, 0}, at::kFloat).view({2, 5});
    auto lp = model->MaskedTokenLogprobs(tokens, mask);
    ASSERT_TRUE(lp.ok()) << lp.status().ToString();
    const at::Tensor full = at::log_softmax(*model->Forward(tokens), -1).narrow(1, 0, 5);
    const at::Tensor want = full.gather(2, tokens.narrow(1, 1, 5).unsqueeze(2)).squeeze(2) * mask;
    EXPECT_TRUE(at::allclose(*lp, want, 1e-5, 1e-5)) << *lp << want;
    lp->sum().backward();
    EXPECT_TRUE(model->NamedParameters().front().second.grad().defined());
    EXPECT_FALSE(model->MaskedTokenLogprobs(tokens, mask.narrow(1, 0, 4)).ok());
    // At a temperature: the log-probabilities of the tempered distribution, as the sampler reports.
    auto hot = model->MaskedTokenLogprobs(tokens, mask, 0.7);
    ASSERT_TRUE(hot.ok());
    const at::Tensor full_hot = at::log_softmax(*model->Forward(tokens) / 0.7, -1).narrow(1, 0, 5);
    const at::Tensor want_hot = full_hot.gather(2, tokens.narrow(1, 1, 5).unsqueeze(2)).squeeze(2) * mask;
    EXPECT_TRUE(at::allclose(*hot, want_hot, 1e-5, 1e-5));
    EXPECT_FALSE(model->MaskedTokenLogprobs(tokens, mask, 0).ok());
  }
}

// A mixture of experts learns its routing as transformers' does, through the weights of the chosen
// experts: the router's gradient is the loss's slope (a central difference on its largest entry).
TEST(TransformerTest, TheRoutersGradientIsTheLosssSlope) {
  auto model = Transformer::Create(TinyConfig(Architecture::kQwen3Moe), 3);
  ASSERT_TRUE(model.ok());
  testing::RandomizeWeights(&*model, 9);  // clear-cut choices: a small step flips none
  const at::Tensor tokens = at::tensor({1, 4, 5, 6, 7, 2, 9, 8}, at::kLong).view({1, 8});
  const auto loss = [&] { return model->Forward(tokens).value().select(2, 3).sum(); };
  at::Tensor router;
  for (auto& [name, p] : model->NamedParameters()) {
    if (name == "model.layers.1.mlp.gate.weight") router = p;
  }
  ASSERT_TRUE(router.defined());
  loss().backward();
  const at::Tensor grad = router.grad().clone();
  const int64_t at = grad.abs().argmax().item<int64_t>();
  const double analytic = grad.view({-1})[at].item<double>();
  ASSERT_GT(std::abs(analytic), 1e-2);
  const double eps = 1e-2;
  c10::NoGradGuard no_grad;
  const double base = router.view({-1})[at].item<double>();
  router.view({-1})[at].fill_(base + eps);
  const double up = loss().item<double>();
  router.view({-1})[at].fill_(base - eps);
  const double down = loss().item<double>();
  router.view({-1})[at].fill_(base);
  EXPECT_NEAR((up - down) / (2 * eps), analytic, 0.02 * std::abs(analytic));
}

// Routing replay: replaying what a forward recorded changes nothing; other experts change the
// logits and still train the router; malformed routes are refused with InvalidArgument.
TEST(TransformerTest, ReplayedRoutesAreCheckedAndTheRouterStillLearns) {
  const ModelConfig c = TinyConfig(Architecture::kQwen3Moe);  // 2 sparse layers, top 2 of 4
  auto model = Transformer::Create(c, 3);
  ASSERT_TRUE(model.ok());
  testing::RandomizeWeights(&*model, 9);
  const at::Tensor tokens = at::tensor({1, 4, 5, 6, 7, 2, 9, 8}, at::kLong).view({2, 4});
  at::Tensor recorded;
  Routes record;
  record.record = &recorded;
  const at::Tensor free = model->Forward(tokens, record).value();
  ASSERT_EQ(recorded.sizes(), (std::vector<int64_t>{2, 4, c.SparseLayerCount(), 2}));
  Routes same;
  same.replay = recorded;
  EXPECT_TRUE(model->Forward(tokens, same).value().equal(free));

  Routes other;
  other.replay = (recorded + 1).remainder(c.moe.num_experts);  // every token moved to other experts
  const at::Tensor replayed = model->Forward(tokens, other).value();
  EXPECT_GT((replayed - free).abs().max().item<double>(), 1e-3);
  replayed.sum().backward();
  for (auto& [name, p] : model->NamedParameters()) {
    if (name.find("mlp.gate.weight") != std::string::npos) {
      ASSERT_TRUE(p.grad().defined()) << name;
      EXPECT_GT(p.grad().abs().max().item<double>(), 0) << name;
    }
  }

  const auto refused = [&](const at::Tensor& replay) {
    Routes bad;
    bad.replay = replay;
    const auto r = model->Forward(tokens, bad);
    return !r.ok() && r.status().code() == Code::kInvalidArgument;
  };
  EXPECT_TRUE(refused(recorded.narrow(1, 0, 3)));               // not one per token
  EXPECT_TRUE(refused(recorded.to(at::kFloat)));                // not integers
  EXPECT_TRUE(refused(recorded + c.moe.num_experts));           // outside [0, E)
  at::Tensor repeated = recorded.clone();
  repeated.select(3, 1).copy_(repeated.select(3, 0));
  EXPECT_TRUE(refused(repeated));                               // one expert twice
  at::Tensor half = recorded.clone();
  half[0][0][0][1] = -1;
  EXPECT_TRUE(refused(half));                                   // half free
  at::Tensor all_free = at::full_like(recorded, -1);
  EXPECT_TRUE(model->Forward(tokens, Routes{all_free}).value().equal(free));

  auto dense = Transformer::Create(TinyConfig(Architecture::kQwen3), 3);
  ASSERT_TRUE(dense.ok());
  at::Tensor none;
  Routes dense_record;
  dense_record.record = &none;
  ASSERT_TRUE(dense->Forward(tokens, dense_record).ok());
  EXPECT_EQ(none.size(2), 0);  // no sparse layers, nothing to record
}

TEST(TransformerTest, SameSeedSameWeights) {
  auto a = Transformer::Create(TinyConfig(Architecture::kLlama), 5);
  auto b = Transformer::Create(TinyConfig(Architecture::kLlama), 5);
  auto c = Transformer::Create(TinyConfig(Architecture::kLlama), 6);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto pa = a->NamedParameters(), pb = b->NamedParameters(), pc = c->NamedParameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_TRUE(pa[i].second.equal(pb[i].second)) << pa[i].first;
  EXPECT_FALSE(pa[0].second.equal(pc[0].second));
}

TEST(TransformerTest, ParameterNamesAreHuggingFaces) {
  auto untied = Transformer::Create(TinyConfig(Architecture::kQwen3, false), 1);
  ASSERT_TRUE(untied.ok());
  std::vector<std::string> names;
  for (const auto& [name, t] : untied->NamedParameters()) names.push_back(name);
  const std::vector<std::string> expected_front = {
      "model.embed_tokens.weight",
      "model.layers.0.self_attn.q_proj.weight",
      "model.layers.0.self_attn.k_proj.weight",
      "model.layers.0.self_attn.v_proj.weight",
      "model.layers.0.self_attn.o_proj.weight",
      "model.layers.0.self_attn.q_norm.weight",
      "model.layers.0.self_attn.k_norm.weight",
      "model.layers.0.mlp.gate_proj.weight",
      "model.layers.0.mlp.up_proj.weight",
      "model.layers.0.mlp.down_proj.weight",
      "model.layers.0.input_layernorm.weight",
      "model.layers.0.post_attention_layernorm.weight"};
  ASSERT_GE(names.size(), expected_front.size());
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 12), expected_front);
  EXPECT_EQ(names[names.size() - 2], "model.norm.weight");
  EXPECT_EQ(names.back(), "lm_head.weight");
  // Qwen2, tied: q/k/v biases, no o bias, no q/k norms, no lm_head.
  // 1 + 2 layers * (q, k, v weights and biases 6 + o 1 + mlp 3 + norms 2) + norm = 26
  auto qwen2 = Transformer::Create(TinyConfig(Architecture::kQwen2, true), 1);
  ASSERT_TRUE(qwen2.ok());
  const NamedTensors p = qwen2->NamedParameters();
  EXPECT_EQ(p.size(), 26u);
  EXPECT_EQ(p[2].first, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_EQ(p[2].second.sizes(), (std::vector<int64_t>{32}));
  EXPECT_EQ(p[3].first, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(p[3].second.sizes(), (std::vector<int64_t>{16, 32}));  // 2 KV heads of 8
  // Llama with attention_bias: o_proj has a bias too.
  ModelConfig biased = TinyConfig(Architecture::kLlama);
  biased.attention_bias = true;
  auto llama = Transformer::Create(biased, 1);
  ASSERT_TRUE(llama.ok());
  EXPECT_EQ(llama->NamedParameters()[8].first, "model.layers.0.self_attn.o_proj.bias");
}

TEST(TransformerTest, ParameterCountMatchesTheModel) {
  for (Architecture a : {Architecture::kLlama, Architecture::kQwen2, Architecture::kQwen3,
                         Architecture::kQwen3Moe, Architecture::kMistral, Architecture::kMixtral}) {
    for (bool tied : {true, false}) {
      for (bool bias : {true, false}) {
        ModelConfig c = TinyConfig(a, tied);
        c.attention_bias = bias && c.reads_attention_bias();
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
  // Qwen3-MoE with dense layers among the sparse ones: every other layer sparse, and of those
  // layer 3 kept dense, so layers 1 and 5 of 0..5 hold experts.
  ModelConfig mixed = TinyConfig(Architecture::kQwen3Moe);
  mixed.num_hidden_layers = 6;
  mixed.moe.decoder_sparse_step = 2;
  mixed.moe.mlp_only_layers = {3};
  auto model = Transformer::Create(mixed, 1);
  ASSERT_TRUE(model.ok());
  int64_t numel = 0, routers = 0;
  for (const auto& [name, t] : model->NamedParameters()) {
    numel += t.numel();
    const std::string router = ".mlp.gate.weight";
    if (name.size() > router.size() && name.compare(name.size() - router.size(), router.size(), router) == 0) {
      ++routers;
    }
  }
  EXPECT_EQ(routers, 2);
  EXPECT_EQ(ParameterCount(mixed).value(), numel);
  ModelConfig huge = TinyConfig();
  huge.hidden_size = huge.vocab_size = huge.num_hidden_layers = huge.intermediate_size = 1 << 24;
  huge.num_attention_heads = huge.num_key_value_heads = 1;
  huge.head_dim = 2;
  EXPECT_EQ(ParameterCount(huge).status().code(), Code::kConfig);
  ModelConfig many_experts = TinyConfig(Architecture::kQwen3Moe);
  many_experts.hidden_size = many_experts.moe.moe_intermediate_size = many_experts.moe.num_experts = 1 << 22;
  EXPECT_EQ(ParameterCount(many_experts).status().code(), Code::kConfig);
}

TEST(TransformerTest, CloneIsIndependent) {
  auto model = Transformer::Create(TinyConfig(Architecture::kLlama), 1);
  ASSERT_TRUE(model.ok());
  auto copy = model->Clone();
  ASSERT_TRUE(copy.ok());
  const at::Tensor x = at::ones({1, 4}, at::kLong);
  EXPECT_TRUE(model->Forward(x)->equal(*copy->Forward(x)));
  testing::ScaleWeights(&*copy, 2.0);
  EXPECT_FALSE(model->Forward(x)->equal(*copy->Forward(x)));
}

TEST(TransformerTest, LoadRejectsMismatchesAndChangesNothing) {
  auto model = Transformer::Create(TinyConfig(Architecture::kLlama), 1);
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

TEST(TransformerTest, GroupedQueryAttentionEqualsRepeatedKeyValueHeads) {
  // A model with 2 KV heads gives the logits of a model with 4 whose heads 2g and 2g+1 both hold
  // KV head g: HF's repeat_kv.
  const ModelConfig gqa_config = TinyConfig(Architecture::kLlama, true, 2);
  const ModelConfig mha_config = TinyConfig(Architecture::kLlama, true, 4);
  auto gqa = Transformer::Create(gqa_config, 3);
  auto mha = Transformer::Create(mha_config, 4);
  ASSERT_TRUE(gqa.ok() && mha.ok());
  testing::RandomizeWeights(&*gqa, 5);
  NamedTensors weights;
  for (const auto& [name, t] : gqa->NamedParameters()) {
    const bool kv =
        name.find("k_proj") != std::string::npos || name.find("v_proj") != std::string::npos;
    // [2 * 8, 32] -> [2, 1, 8, 32] -> [2, 2, 8, 32] -> [4 * 8, 32]
    weights.emplace_back(
        name, kv ? t.view({2, 1, 8, -1}).expand({2, 2, 8, t.size(1)}).reshape({32, -1}) : t);
  }
  ASSERT_TRUE(mha->LoadNamedParameters(weights).ok());
  const at::Tensor x = at::tensor({1, 4, 5, 13, 6, 7, 14}, at::kLong).unsqueeze(0);
  const double diff = (*gqa->Forward(x) - *mha->Forward(x)).abs().max().item<double>();
  EXPECT_LT(diff, 1e-5);
}

TEST(TransformerTest, Bfloat16ComputeTracksFloat32) {
  auto f32 = Transformer::Create(TinyConfig(Architecture::kQwen3), 2);
  ASSERT_TRUE(f32.ok());
  testing::RandomizeWeights(&*f32, 9, 0.1);
  auto bf16 = Transformer::Create(TinyConfig(Architecture::kQwen3), 2, DType::kBF16);
  ASSERT_TRUE(bf16.ok());
  EXPECT_EQ(bf16->dtype(), DType::kBF16);
  ASSERT_TRUE(bf16->LoadNamedParameters(f32->NamedParameters()).ok());
  EXPECT_EQ(bf16->NamedParameters()[0].second.scalar_type(), at::kBFloat16);
  const at::Tensor x = at::tensor({1, 4, 5, 13, 6, 7, 14}, at::kLong).unsqueeze(0);
  auto a = f32->Forward(x), b = bf16->Forward(x);
  ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
  EXPECT_EQ(b->scalar_type(), at::kFloat);
  const double scale = a->abs().max().item<double>();
  EXPECT_LT((*a - *b).abs().max().item<double>(), 0.05 * scale);
  auto clone = bf16->Clone();
  ASSERT_TRUE(clone.ok());
  EXPECT_EQ(clone->dtype(), DType::kBF16);
}

TEST(TransformerTest, InputsOutsideTheModelAreInvalidArguments) {
  auto model = Transformer::Create(TinyConfig(Architecture::kQwen2), 1);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->Forward(at::ones({1, 17}, at::kLong)).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::full({1, 2}, 15, at::kLong)).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::ones({1, 2})).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(model->Forward(at::Tensor()).status().code(), Code::kInvalidArgument);
}

// A 1-layer model fits a fixed batch: the loss falls well within 50 Adam steps.
TEST(TransformerTest, LossFallsOnAFixedBatch) {
  ModelConfig c = TinyConfig(Architecture::kLlama);
  c.num_hidden_layers = 1;
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
