// The building blocks of the decoder: RMSNorm, rotary embedding (with Llama 3.1 scaling),
// grouped-query causal attention that can read and append to a KV cache, the SwiGLU MLP, and the
// pre-norm decoder layer — each named as Hugging Face names it, so that the module tree's state
// dict is the HF one.
//
// Internal to lib/rl/model: this header includes the torch::nn headers, so only the .cc files of
// this folder include it. Shapes: B batch rows, T new tokens per row, D = hidden_size, H query
// heads and G key/value heads of width Dh, S cache slots, C = context.
// Numerics follow HF: RMSNorm and softmax in float32 whatever the compute dtype, rotary angles in
// float64 then cast.
// Thread safety: modules are not synchronized; callers serialize use of one module.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "rl/model/config.h"
#include "rl/model/tensor_parallel.h"

#include <memory>
#include <vector>

namespace rl::model {

// Where one layer's attention reads and writes cached keys and values.
struct CacheView {
  at::Tensor k;      // [S, G, C, Dh], written in place
  at::Tensor v;      // [S, G, C, Dh]
  at::Tensor slots;  // [B] int64: the cache slot of each batch row
  bool all_slots;    // slots is exactly 0..S-1, so no gather is needed
  int64_t kv_len;    // attend over cache positions [0, kv_len): max over rows of length + T
};

// Routing replay for one sparse layer (R3: "Stabilizing MoE Reinforcement Learning by Aligning
// Training and Inference Routers", Ma et al. 2025): the experts a forward used, recorded while
// generating and replayed while training, so that the trainer's logits come from the experts the
// sampled tokens came from. Tokens are the N = B * T rows of the layer's input in row-major order.
struct RouteSlot {
  const at::Tensor* replay = nullptr;  // [N, k] int64: the experts of each token; a row whose
                                       // first entry is -1 routes freely
  at::Tensor* record = nullptr;        // set to the [N, k] int64 experts the router itself picks
                                       // (its top k): those used where nothing is replayed
};

// x * rsqrt(mean(x^2) + eps) * weight over the last dimension. Parameter: weight [dim].
class RmsNormImpl : public torch::nn::Module {
 public:
  RmsNormImpl(int64_t dim, double eps);
  at::Tensor forward(const at::Tensor& x);

 private:
  double eps_;
  at::Tensor weight_;
};
TORCH_MODULE(RmsNorm);

// The inverse frequencies [Dh/2] of rotary embedding: theta^(-2i/Dh), rescaled per Llama 3.1 when
// the config says rope_type "llama3".
at::Tensor RotaryInverseFrequencies(const ModelConfig& c);

// Rotary position embedding (rotate-half layout), precomputed for positions [0, context). The
// tables are not parameters and are not saved. A model builds them once and every attention layer
// shares them (SharedRotary): they are C x Dh/2 x 8 bytes, 21 MB for Qwen3-0.6B's context of 40960,
// which one copy per layer made 0.6 GB, half of the bf16 weights. Immutable once built, so the
// copies a Clone or a shard makes can share them too.
class Rotary {
 public:
  explicit Rotary(const ModelConfig& c);
  // x [B, heads, T, Dh], positions [B, T] int64 -> x rotated by the angle of each row's position.
  at::Tensor Apply(const at::Tensor& x, const at::Tensor& positions) const;
  // The same tables on `device` (Module::to does not move them: they are neither parameters nor
  // buffers, which a dtype change would round to bfloat16). This one is left as it is.
  Rotary On(const at::Device& device) const;
  const at::Tensor& cos() const { return cos_; }

 private:
  Rotary() = default;
  at::Tensor cos_, sin_;  // [C, Dh/2] float32
};
using SharedRotary = std::shared_ptr<const Rotary>;

// self_attn: q_proj [H*Dh, D], k_proj and v_proj [G*Dh, D] (biases per ModelConfig::qkv_bias),
// o_proj [D, H*Dh] (bias per o_bias), q_norm and k_norm [Dh] (Qwen3). Under tensor parallelism of
// size t a rank holds H/t query and G/t key/value heads (tensor_parallel.h) and all-reduces the
// output.
class AttentionImpl : public torch::nn::Module {
 public:
  AttentionImpl(const ModelConfig& c, const TensorParallel& tp, SharedRotary rope);
  // x [B, T, D], positions [B, T] -> [B, T, D]. With a cache, the new keys and values are written
  // at (slot, position) first and the queries attend over the slot's cached prefix; without one
  // they attend over x itself. Either way a query sees exactly the keys at positions <= its own.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions, const CacheView* cache);
  void SetRotary(SharedRotary rope) { rope_ = std::move(rope); }
  const Rotary& rotary() const { return *rope_; }

 private:
  int64_t n_heads_, n_kv_heads_, head_dim_;  // this rank's heads
  TensorParallel tp_;
  SharedRotary rope_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, o_proj_{nullptr};
  RmsNorm q_norm_{nullptr}, k_norm_{nullptr};
};
TORCH_MODULE(Attention);

// The names of a SwiGLU MLP's three projections: HF's gate_proj, up_proj, down_proj, or Mixtral's
// experts' w1, w3, w2.
struct MlpNames {
  const char* gate;
  const char* up;
  const char* down;
};
inline constexpr MlpNames kMlpNames{"gate_proj", "up_proj", "down_proj"};
inline constexpr MlpNames kMixtralExpertNames{"w1", "w3", "w2"};

// mlp: down_proj(silu(gate_proj(x)) * up_proj(x)), no biases, `intermediate` wide. Under tensor
// parallelism a rank holds intermediate/t of the columns, and its output is a partial sum that
// forward all-reduces when `reduce` (an expert's is summed by its sparse block instead).
class MlpImpl : public torch::nn::Module {
 public:
  MlpImpl(int64_t hidden, int64_t intermediate, const TensorParallel& tp, bool reduce = true,
          const MlpNames& names = kMlpNames);
  at::Tensor forward(const at::Tensor& x);

 private:
  TensorParallel tp_;
  bool reduce_;
  torch::nn::Linear gate_proj_{nullptr}, up_proj_{nullptr}, down_proj_{nullptr};
};
TORCH_MODULE(Mlp);

// The sparse MLP of Qwen3-MoE (mlp) and Mixtral (block_sparse_moe): gate [E, D] (the router, no
// bias) and experts.{e} (E SwiGLU MLPs of moe_intermediate_size; Mixtral's named w1, w3, w2).
// Each token goes to the k experts of highest softmax(gate(x)) (softmax in float32; the k
// weights renormalized to sum 1 when norm_topk_prob), and the output
// is the experts' outputs weighted by those probabilities. With a replayed route (RouteSlot) a
// token uses the replayed experts instead of its top k, weighted by their softmax probabilities
// (renormalized when norm_topk_prob, which is R3's masked softmax); the router is still trained
// through those weights. The gradient reaches the router
// through the weights, as in HF. Under tensor parallelism every expert is split as a dense MLP
// is (the router replicated, so every rank routes alike) and the block all-reduces once.
class SparseMoeImpl : public torch::nn::Module {
 public:
  SparseMoeImpl(const ModelConfig& c, const TensorParallel& tp);
  at::Tensor forward(const at::Tensor& x, const RouteSlot& route = {});

 private:
  TensorParallel tp_;
  int64_t top_k_;
  bool norm_topk_prob_;
  torch::nn::Linear gate_{nullptr};
  torch::nn::ModuleList experts_{nullptr};
  std::vector<Mlp> expert_list_;
};
TORCH_MODULE(SparseMoe);

// x + self_attn(input_layernorm(x)), then x + mlp(post_attention_layernorm(x)); mlp is a
// SparseMoe where the config says layer `index` is sparse (`route` applies to it only).
class DecoderLayerImpl : public torch::nn::Module {
 public:
  DecoderLayerImpl(const ModelConfig& c, const TensorParallel& tp, int64_t index, SharedRotary rope);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions, const CacheView* cache,
                     const RouteSlot& route = {});
  bool sparse() const { return !moe_.is_empty(); }
  void SetRotary(SharedRotary rope) { self_attn_->SetRotary(std::move(rope)); }
  const Rotary& rotary() const { return self_attn_->rotary(); }

 private:
  Attention self_attn_{nullptr};
  Mlp mlp_{nullptr};          // dense layers
  SparseMoe moe_{nullptr};    // sparse layers
  RmsNorm input_layernorm_{nullptr}, post_attention_layernorm_{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace rl::model
