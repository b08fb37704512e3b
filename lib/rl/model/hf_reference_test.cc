// Our logits against tests/reference/hf_reference.py, an independent float64 implementation of
// the six families written from their public definitions (it needs python3 with torch; the test
// skips without them).
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "rl/model/hf_dir.h"
#include "rl/model/hf_reference.h"
#include "rl/model/test_util.h"

namespace rl::model {
namespace {

using testing::ReferenceLogits;
using testing::ReferenceRun;
using testing::TinyConfig;
using testing::TorchPython;

struct Case {
  const char* what;
  ModelConfig config;
  DType saved = DType::kF32;
};

// A Qwen3-MoE of 3 layers, the middle one dense, each token taking 3 of 8 experts without
// renormalizing: every rule of which layers are sparse and how the experts are weighed.
ModelConfig MixedMoe() {
  ModelConfig c = TinyConfig(Architecture::kQwen3Moe, true, 2);
  c.num_hidden_layers = 3;
  c.moe.num_experts = 8;
  c.moe.num_experts_per_tok = 3;
  c.moe.norm_topk_prob = false;
  c.moe.mlp_only_layers = {1};
  return c;
}

std::vector<Case> Cases() {
  ModelConfig llama_biased = TinyConfig(Architecture::kLlama, true, 4);
  llama_biased.attention_bias = true;
  llama_biased.rope_scaling = RopeScaling();  // plain rotary
  ModelConfig qwen2 = TinyConfig(Architecture::kQwen2, true, 1);
  qwen2.rope_theta = 1e6;
  ModelConfig moe_mixed = MixedMoe();
  moe_mixed.attention_bias = true;
  return {
      {"Llama, llama3 rope scaling, 4 heads over 2 KV heads, untied",
       TinyConfig(Architecture::kLlama, false, 2)},
      {"Llama with attention_bias, plain rotary, tied", llama_biased},
      {"Qwen2 with q/k/v biases, 1 KV head, tied", qwen2},
      {"Qwen3 with q/k norms, head_dim 16 != 32 / 4, untied",
       TinyConfig(Architecture::kQwen3, false, 2)},
      {"Qwen3 saved as bfloat16, tied", TinyConfig(Architecture::kQwen3, true, 2), DType::kBF16},
      {"Qwen3-MoE, top 2 of 4 experts renormalized, untied",
       TinyConfig(Architecture::kQwen3Moe, false, 2)},
      {"Qwen3-MoE, top 3 of 8 not renormalized, layer 1 dense, attention_bias, tied", moe_mixed},
      {"Qwen3-MoE saved as bfloat16", TinyConfig(Architecture::kQwen3Moe, false, 1), DType::kBF16},
      {"Mistral, a sliding window as long as the context, untied", TinyConfig(Architecture::kMistral, false, 2)},
      {"Mixtral, top 2 of 4 experts (w1/w3/w2), untied", TinyConfig(Architecture::kMixtral, false, 2)},
  };
}

TEST(HfReferenceTest, LogitsMatchAnIndependentImplementation) {
  if (TorchPython().empty())
    GTEST_SKIP()
        << "no python3 with torch (RL_PYTHON, python3, /usr/bin/python3): reference not run";
  const std::string root =
      ::testing::TempDir() + "/hf_reference_test." + std::to_string(::getpid());
  const std::vector<int64_t> ids = {1, 4, 5, 13, 6, 7, 14, 3, 12, 9, 2, 0, 11};
  uint64_t seed = 20;
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.what);
    auto model = Transformer::Create(c.config, ++seed);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    testing::RandomizeWeights(&*model, ++seed);
    const std::string dir = root + "/" + std::to_string(seed);
    HfSaveOptions save;
    save.dtype = c.saved;
    ASSERT_TRUE(SaveHfModel(dir, *model, save).ok());
    auto loaded = LoadHfModel(dir);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    auto ours = loaded->Forward(at::tensor(ids, at::kLong).unsqueeze(0));
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    const at::Tensor reference = ReferenceLogits(dir, ids);
    ASSERT_TRUE(reference.defined()) << "the reference script failed on " << dir;
    ASSERT_EQ(reference.sizes(), ours->squeeze(0).sizes());
    const double diff = (ours->squeeze(0).to(at::kDouble) - reference).abs().max().item<double>();
    const double scale = reference.abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << "logits up to " << scale;
    EXPECT_GT(scale, 1.0);  // random weights large enough that every part shows in the logits
  }
  std::filesystem::remove_all(root);
}

// Routing replay (R3): the experts our forward records are the reference's top k, and replaying
// other experts gives the reference's logits under the same forced routes.
TEST(HfReferenceTest, RoutingReplayMatchesTheReference) {
  if (TorchPython().empty()) GTEST_SKIP() << "no python3 with torch: reference not run";
  const std::string root = ::testing::TempDir() + "/hf_reference_routes." + std::to_string(::getpid());
  const std::vector<std::pair<const char*, ModelConfig>> cases = {
      {"Qwen3-MoE, top 3 of 8 not renormalized, layer 1 dense", MixedMoe()},
      {"Mixtral, top 2 of 4 renormalized", TinyConfig(Architecture::kMixtral, false, 2)},
  };
  const std::vector<int64_t> ids = {1, 4, 5, 13, 6, 7, 14, 3, 12, 9};
  const int64_t t = static_cast<int64_t>(ids.size());
  uint64_t seed = 70;
  for (const auto& [what, config] : cases) {
    SCOPED_TRACE(what);
    auto made = Transformer::Create(config, ++seed);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
    testing::RandomizeWeights(&*made, ++seed);
    const std::string dir = root + "/" + std::to_string(seed);
    ASSERT_TRUE(SaveHfModel(dir, *made).ok());
    auto model = LoadHfModel(dir);
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    const at::Tensor tokens = at::tensor(ids, at::kLong).unsqueeze(0);
    const int64_t sparse = config.SparseLayerCount(), k = config.moe.num_experts_per_tok;

    at::Tensor recorded;
    Routes record;
    record.record = &recorded;
    ASSERT_TRUE(model->Forward(tokens, record).ok());
    const ReferenceRun free = testing::RunReference(dir, ids);
    ASSERT_TRUE(free.routes.defined()) << "the reference script failed on " << dir;
    ASSERT_EQ(recorded.sizes(), (std::vector<int64_t>{1, t, sparse, k}));
    EXPECT_TRUE(recorded.squeeze(0).equal(free.routes)) << recorded << free.routes;

    // Forced routes: k distinct experts per (token, layer) drawn at random, every third token free.
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    at::Tensor forced = at::empty({t, sparse, k}, at::kLong);
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t l = 0; l < sparse; ++l) {
        forced[i][l] = i % 3 == 2 ? at::full({k}, -1, at::kLong)
                                  : at::randperm(config.moe.num_experts, gen, at::kLong).narrow(0, 0, k);
      }
    }
    Routes replay;
    replay.replay = forced.unsqueeze(0);
    at::Tensor used;  // the routers' own picks
    replay.record = &used;
    auto ours = model->Forward(tokens, replay);
    ASSERT_TRUE(ours.ok()) << ours.status().ToString();
    const ReferenceRun reference = testing::RunReference(dir, ids, forced);
    ASSERT_TRUE(reference.logits.defined()) << "the reference script failed with forced routes";
    EXPECT_LT((ours->squeeze(0).to(at::kDouble) - reference.logits).abs().max().item<double>(), 1e-4);
    EXPECT_GT((reference.logits - free.logits).abs().max().item<double>(), 1e-2);  // the routes mattered
    // The record is each router's own top k: on a free row, the experts the reference used.
    for (int64_t i = 2; i < t; i += 3) EXPECT_TRUE(used[0][i].equal(reference.routes[i])) << "token " << i;

    // The trainer's path replays alike: its log-probabilities are those of the replayed logits.
    const at::Tensor mask = at::ones({1, t - 1}, at::kLong);
    auto logprobs = model->MaskedTokenLogprobs(tokens, mask, 1.0, replay);
    ASSERT_TRUE(logprobs.ok()) << logprobs.status().ToString();
    const at::Tensor expected = at::log_softmax(reference.logits, -1)
                                    .narrow(0, 0, t - 1)
                                    .gather(1, tokens.squeeze(0).narrow(0, 1, t - 1).unsqueeze(1))
                                    .squeeze(1);
    EXPECT_LT((logprobs->squeeze(0).to(at::kDouble) - expected).abs().max().item<double>(), 1e-4);
  }
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace rl::model
