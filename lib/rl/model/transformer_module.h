// TransformerImpl: the decoder-only causal language model (the families of config.h) as a
// torch::nn module (TORCH_MODULE(TransformerModule)), laid out as Hugging Face's *ForCausalLM:
//
//   tokens -> model.embed_tokens -> model.layers.0 .. model.layers.{L-1} -> model.norm
//          -> LM head (model.embed_tokens.weight^T when tied, else lm_head.weight) -> logits
//
// Parameter names (the state dict, and the tensor names in safetensors files), as in HF:
//   model.embed_tokens.weight [V, D]
//   model.layers.{i}.self_attn.{q,k,v,o}_proj.weight (+ .bias per ModelConfig::qkv_bias/o_bias)
//   model.layers.{i}.self_attn.{q,k}_norm.weight [Dh] (Qwen3)
//   model.layers.{i}.mlp.{gate,up,down}_proj.weight (dense layers)
//   model.layers.{i}.mlp.gate.weight [E, D], model.layers.{i}.mlp.experts.{e}.{gate,up,down}_proj.weight
//     (Qwen3-MoE's sparse layers); model.layers.{i}.block_sparse_moe.gate.weight,
//     model.layers.{i}.block_sparse_moe.experts.{e}.{w1,w3,w2}.weight (Mixtral's)
//   model.layers.{i}.input_layernorm.weight, model.layers.{i}.post_attention_layernorm.weight
//   model.norm.weight [D]; lm_head.weight [V, D] (untied only)
//
// This header includes torch::nn: most code should use the light handle in transformer.h, which
// validates inputs and converts exceptions. Methods here throw c10::Error on bad shapes.
// Thread safety: not synchronized.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/pimpl.h>

#include <vector>

#include "rl/model/config.h"
#include "rl/model/layers.h"

namespace rl::model {

class KvCache;

// Routing replay over the stack (layers.h, RouteSlot): one [N, k] int64 tensor per sparse layer,
// in layer order.
struct StackRoutes {
  std::vector<at::Tensor> replay;             // empty: every layer routes freely
  std::vector<at::Tensor>* record = nullptr;  // filled with each sparse layer's router's own picks
};

// The "model." part: embeddings, decoder layers, final norm.
class DecoderStackImpl : public torch::nn::Module {
 public:
  DecoderStackImpl(const ModelConfig& config, const TensorParallel& tp);
  // tokens [B, T] -> hidden states [B, T, D] after the final norm. `caches` is empty or holds
  // one view per layer.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& positions,
                     const std::vector<CacheView>& caches, const StackRoutes& routes = {});
  const at::Tensor& embedding() const { return embed_tokens_->weight; }
  // Gives every layer the rotary tables on `device` (one copy, as at construction).
  void MoveTables(const at::Device& device);
  const std::vector<DecoderLayer>& layers() const { return layer_list_; }

 private:
  torch::nn::Embedding embed_tokens_{nullptr};
  torch::nn::ModuleList layers_{nullptr};
  std::vector<DecoderLayer> layer_list_;
  SharedRotary rope_;  // the one every layer's attention uses
  RmsNorm norm_{nullptr};
};
TORCH_MODULE(DecoderStack);

class TransformerImpl : public torch::nn::Module {
 public:
  // With tp.size > 1, this rank's shard of the model (tensor_parallel.h).
  explicit TransformerImpl(const ModelConfig& config, const TensorParallel& tp = {});

  const ModelConfig& config() const { return config_; }
  const TensorParallel& tensor_parallel() const { return tp_; }

  // tokens [B, T] int64, positions [B, T] int64 -> logits [B, T, V] float32 (computed in the
  // dtype of the parameters).
  // Without a cache a query attends to the rows' own tokens at positions <= its own; with one,
  // the tokens are appended to the cache at positions (which must be each slot's length onward)
  // and attend to the slot's whole prefix. `slots` [B] names the cache slot of each row;
  // all_slots says slots is exactly 0..S-1.
  // last_only: logits of the last position only ([B, 1, V]): a prefill needs no more, and with
  // a vocabulary of 150k the LM head over every prompt position would dominate it.
  at::Tensor forward(const at::Tensor& tokens, const at::Tensor& positions,
                     KvCache* cache = nullptr, const at::Tensor& slots = {}, bool all_slots = false,
                     int64_t kv_len = 0, bool last_only = false, const StackRoutes& routes = {});
  // The two halves of forward without a cache: hidden states [B, T, D] after the final norm, and
  // the LM head over hidden states [..., D] -> float32 logits [..., V].
  at::Tensor hidden(const at::Tensor& tokens, const at::Tensor& positions, const StackRoutes& routes = {});
  at::Tensor logits(const at::Tensor& hidden);

  // Module::to(device) and the tables that are not parameters (rotary angles) with it.
  void MoveTo(const at::Device& device);

  // Draws fresh weights from N(0, 0.02) with a generator seeded by `seed` (o_proj and down_proj,
  // Mixtral's w2, scaled by 1/sqrt(2 * layers)), biases 0, norm weights 1. Same seed, same weights.
  void InitWeights(uint64_t seed);

 private:
  ModelConfig config_;
  TensorParallel tp_;
  DecoderStack model_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
};
TORCH_MODULE_IMPL(TransformerModule, TransformerImpl);

}  // namespace rl::model
