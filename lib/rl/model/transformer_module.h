// TransformerImpl: the decoder-only pre-norm transformer as a torch::nn module
// (TORCH_MODULE(TransformerModule)).
//
//   tokens -> tok_emb (+ pos_emb when positions are learned) -> blocks.0 .. blocks.{L-1}
//          -> norm_f -> LM head (tok_emb.weight^T when tied, else lm_head.weight) -> logits
//
// Parameter names (the state dict, and the tensor names in safetensors files):
//   tok_emb.weight [V, D]; pos_emb.weight [C, D] (learned positions only);
//   blocks.{i}.norm1.weight (+ .bias for layernorm); blocks.{i}.attn.qkv.{weight [3D, D], bias};
//   blocks.{i}.attn.proj.{weight, bias}; blocks.{i}.norm2.*; blocks.{i}.mlp.fc.{weight, bias};
//   blocks.{i}.mlp.proj.{weight, bias}; norm_f.*; lm_head.weight [V, D] (untied only).
//
// This header includes torch::nn: most code should use the light handle in transformer.h, which
// validates inputs and converts exceptions. Methods here throw c10::Error on bad shapes.
// Thread safety: not synchronized.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include "rl/model/config.h"
#include "rl/model/layers.h"

namespace rl::model {

class KvCache;

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const ModelConfig& config);

  const ModelConfig& config() const { return config_; }

  // tokens [B, T] int64, positions [B, T] int64 -> logits [B, T, V] float32.
  // Without a cache a query attends to the rows' own tokens at positions <= its own; with one,
  // the tokens are appended to the cache at positions (which must be each slot's length onward)
  // and attend to the slot's whole prefix. `slots` [B] names the cache slot of each row;
  // all_slots says slots is exactly 0..S-1.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& positions,
                     KvCache* cache = nullptr, const at::Tensor& slots = {}, bool all_slots = false,
                     int64_t kv_len = 0);

  // Draws fresh weights from N(0, 0.02) with a generator seeded by `seed` (output projections
  // scaled by 1/sqrt(2 * n_layers)), biases 0, norm weights 1. Same seed, same weights.
  void InitWeights(uint64_t seed);

 private:
  ModelConfig config_;
  torch::nn::Embedding tok_emb_{nullptr}, pos_emb_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  std::vector<Block> block_list_;
  NormLayer norm_f_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
};
TORCH_MODULE_IMPL(TransformerModule, TransformerImpl);

}  // namespace rl::model
