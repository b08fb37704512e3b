// Helpers shared by the tests of lib/rl/model (not part of the library).
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "rl/model/config.h"
#include "rl/model/transformer.h"

namespace rl::model::testing {

#ifdef RL_SOURCE_DIR
// The demo's model directory (config and tokenizer, no weights).
inline std::string DemoDir() { return std::string(RL_SOURCE_DIR) + "/share/models/addition-tiny"; }
#endif

// Every test binary runs libtorch on one thread: the machine is shared, and results stay
// reproducible.
inline const bool kSingleThreaded = (at::set_num_threads(1), true);

// A plain tied Llama of the given shape (kv_heads 0: as many as the query heads), for the tests
// of the roles that need some small model rather than one family's features.
inline ModelConfig TinyLlama(int64_t hidden, int64_t intermediate, int64_t layers, int64_t heads,
                             int64_t kv_heads, int64_t context) {
  ModelConfig c;
  c.vocab_size = 15;
  c.hidden_size = hidden;
  c.intermediate_size = intermediate;
  c.num_hidden_layers = layers;
  c.num_attention_heads = heads;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = context;
  c.tie_word_embeddings = true;
  return c;
}

// A tiny model of each family: vocabulary 15, hidden 32, 2 layers, 4 query heads over `kv_heads`
// key/value heads, context 16. Qwen3 and Qwen3-MoE get head_dim 16 (not hidden / heads = 8), Llama
// the Llama 3.1 rope scaling (with a small original context, so that it changes the frequencies),
// Qwen3-MoE and Mixtral 4 experts of width 24 in every layer, each token routed to 2
// (renormalized), Mistral a sliding window as long as the context.
inline ModelConfig TinyConfig(Architecture arch = Architecture::kLlama, bool tied = true,
                              int64_t kv_heads = 2) {
  ModelConfig c;
  c.architecture = arch;
  c.vocab_size = 15;
  c.hidden_size = 32;
  c.intermediate_size = 48;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = kv_heads;
  c.max_position_embeddings = 16;
  c.tie_word_embeddings = tied;
  c.rms_norm_eps = 1e-5;
  if (arch == Architecture::kQwen3 || arch == Architecture::kQwen3Moe) c.head_dim = 16;
  if (arch == Architecture::kQwen3Moe || arch == Architecture::kMixtral) {
    c.moe.num_experts = 4;
    c.moe.num_experts_per_tok = 2;
    c.moe.moe_intermediate_size = 24;
    c.moe.norm_topk_prob = true;
  }
  if (arch == Architecture::kMixtral) c.intermediate_size = 24;  // Mixtral's experts' width
  if (arch == Architecture::kMistral) c.sliding_window = c.max_position_embeddings;
  if (arch == Architecture::kLlama) {
    c.rope_theta = 500000.0;
    c.rope_scaling.llama3 = true;
    c.rope_scaling.factor = 8;
    c.rope_scaling.low_freq_factor = 1;
    c.rope_scaling.high_freq_factor = 4;
    c.rope_scaling.original_max_position_embeddings = 8;
  }
  return c;
}

// Multiplies every weight by `factor`: freshly initialized weights are small, so attention is
// nearly uniform; larger ones make a test sensitive to which positions a query sees.
inline void ScaleWeights(Transformer* model, double factor) {
  c10::NoGradGuard no_grad;
  for (at::Tensor& p : model->Parameters()) p.mul_(factor);
}

// Replaces every parameter (norm weights and biases included) with N(mean, std) draws from a
// generator seeded by `seed`, mean 1 for norm weights and 0 otherwise, so that every tensor
// matters to the logits.
inline void RandomizeWeights(Transformer* model, uint64_t seed, double std = 0.3) {
  c10::NoGradGuard no_grad;
  at::manual_seed(seed);
  for (auto& [name, p] : model->NamedParameters()) {
    const double mean = name.find("norm") != std::string::npos ? 1.0 : 0.0;
    p.copy_(at::randn(p.sizes(), at::kFloat) * std + mean);
  }
}

// `n` prompts for the tiny configs: <bos> 1, then 1 to 5 ids from 3..14, each unlike the next.
inline std::vector<std::vector<int64_t>> MixedPrompts(int n) {
  std::vector<std::vector<int64_t>> prompts;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> p = {1};
    for (int j = 0; j < 1 + i % 5; ++j) p.push_back(3 + (i * 7 + j * 3) % 12);
    prompts.push_back(p);
  }
  return prompts;
}

}  // namespace rl::model::testing
