// The building blocks of the transformer: normalization, rotary embedding, causal attention that
// can read and append to a KV cache, the GELU MLP, and the pre-norm block.
//
// Internal to lib/rl/model: this header includes the torch::nn headers, so only the .cc files of
// this folder include it. Shapes: B batch rows, T new tokens per row, D = d_model, H heads of
// width Dh, S cache slots, C = context.
// Thread safety: modules are not synchronized; callers serialize use of one module.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include "rl/model/config.h"

namespace rl::model {

// Where one layer's attention reads and writes cached keys and values.
struct CacheView {
  at::Tensor k;      // [S, H, C, Dh], written in place
  at::Tensor v;      // [S, H, C, Dh]
  at::Tensor slots;  // [B] int64: the cache slot of each batch row
  bool all_slots;    // slots is exactly 0..S-1, so no gather is needed
  int64_t kv_len;    // attend over cache positions [0, kv_len): max over rows of length + T
};

// LayerNorm (weight and bias) or RMSNorm (weight only), eps 1e-5.
class NormLayerImpl : public torch::nn::Module {
 public:
  NormLayerImpl(int64_t dim, Norm kind);
  at::Tensor forward(const at::Tensor& x);

 private:
  Norm kind_;
  int64_t dim_;
  at::Tensor weight_, bias_;
};
TORCH_MODULE(NormLayer);

// Rotary position embedding (GPT-NeoX "rotate half" layout, base 10000), precomputed for
// positions [0, context). The tables are not parameters and are not saved.
class Rotary {
 public:
  Rotary() = default;
  Rotary(int64_t head_dim, int64_t context);
  // x [B, H, T, Dh], positions [B, T] int64 -> x rotated by the angle of each row's position.
  at::Tensor Apply(const at::Tensor& x, const at::Tensor& positions) const;

 private:
  at::Tensor cos_, sin_;  // [C, Dh/2]
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(const ModelConfig& c);
  // x [B, T, D], positions [B, T] -> [B, T, D]. With a cache, the new keys and values are written
  // at (slot, position) first and the queries attend over the slot's cached prefix; without one
  // they attend over x itself. Either way a query sees exactly the keys at positions <= its own.
  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions, const CacheView* cache);

 private:
  int64_t n_heads_, head_dim_;
  bool rotary_;
  Rotary rope_;
  torch::nn::Linear qkv_{nullptr}, proj_{nullptr};
};
TORCH_MODULE(Attention);

class MlpImpl : public torch::nn::Module {
 public:
  explicit MlpImpl(const ModelConfig& c);
  at::Tensor forward(const at::Tensor& x);

 private:
  torch::nn::Linear fc_{nullptr}, proj_{nullptr};
};
TORCH_MODULE(Mlp);

// x + attn(norm1(x)), then x + mlp(norm2(x)).
class BlockImpl : public torch::nn::Module {
 public:
  explicit BlockImpl(const ModelConfig& c);
  at::Tensor forward(const at::Tensor& x, const at::Tensor& positions, const CacheView* cache);

 private:
  NormLayer norm1_{nullptr}, norm2_{nullptr};
  Attention attn_{nullptr};
  Mlp mlp_{nullptr};
};
TORCH_MODULE(Block);

}  // namespace rl::model
