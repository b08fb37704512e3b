#include "rl/model/layers.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace rl::model {

NormLayerImpl::NormLayerImpl(int64_t dim, Norm kind) : kind_(kind), dim_(dim) {
  weight_ = register_parameter("weight", at::ones({dim}));
  if (kind_ == Norm::kLayerNorm) bias_ = register_parameter("bias", at::zeros({dim}));
}

at::Tensor NormLayerImpl::forward(const at::Tensor& x) {
  if (kind_ == Norm::kLayerNorm) return at::layer_norm(x, {dim_}, weight_, bias_, 1e-5);
  return x * at::rsqrt(x.pow(2).mean(-1, /*keepdim=*/true) + 1e-5) * weight_;
}

Rotary::Rotary(int64_t head_dim, int64_t context) {
  const int64_t half = head_dim / 2;
  at::Tensor inv_freq =
      at::pow(10000.0, -at::arange(0, half, at::kDouble) / static_cast<double>(half));
  at::Tensor angles = at::arange(0, context, at::kDouble).unsqueeze(1) * inv_freq.unsqueeze(0);
  cos_ = angles.cos().to(at::kFloat);
  sin_ = angles.sin().to(at::kFloat);
}

at::Tensor Rotary::Apply(const at::Tensor& x, const at::Tensor& positions) const {
  const int64_t b = positions.size(0), t = positions.size(1), half = cos_.size(1);
  const at::Tensor flat = positions.reshape({-1});
  const at::Tensor c = cos_.index_select(0, flat).view({b, 1, t, half});
  const at::Tensor s = sin_.index_select(0, flat).view({b, 1, t, half});
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1);
}

AttentionImpl::AttentionImpl(const ModelConfig& c)
    : n_heads_(c.n_heads), head_dim_(c.head_dim()), rotary_(c.positions == Positions::kRotary) {
  if (rotary_) rope_ = Rotary(head_dim_, c.context);
  qkv_ = register_module("qkv", torch::nn::Linear(c.d_model, 3 * c.d_model));
  proj_ = register_module("proj", torch::nn::Linear(c.d_model, c.d_model));
}

namespace {

// Writes k and v ([B, H, T, Dh]) into the cache at (slot of row b, positions[b, i]) and returns
// the keys and values each row attends over ([B, H, kv_len, Dh]) with their positions.
std::pair<at::Tensor, at::Tensor> AppendToCache(const CacheView& cache, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& positions) {
  using at::indexing::Slice;
  const at::Tensor rows = cache.slots.view({-1, 1}).expand_as(positions);
  // Advanced indices at dims 0 and 2 put their broadcast shape [B, T] first: values [B, T, H, Dh].
  at::Tensor cache_k = cache.k, cache_v = cache.v;  // handles: the writes land in the cache
  cache_k.index_put_({rows, Slice(), positions}, k.permute({0, 2, 1, 3}));
  cache_v.index_put_({rows, Slice(), positions}, v.permute({0, 2, 1, 3}));
  at::Tensor keys = cache.all_slots ? cache.k : cache.k.index_select(0, cache.slots);
  at::Tensor values = cache.all_slots ? cache.v : cache.v.index_select(0, cache.slots);
  return {keys.narrow(2, 0, cache.kv_len), values.narrow(2, 0, cache.kv_len)};
}

}  // namespace

at::Tensor AttentionImpl::forward(const at::Tensor& x, const at::Tensor& positions,
                                  const CacheView* cache) {
  const int64_t b = x.size(0), t = x.size(1), d = x.size(2);
  // [B, T, 3, H, Dh] -> three [B, H, T, Dh]
  const at::Tensor qkv =
      qkv_->forward(x).view({b, t, 3, n_heads_, head_dim_}).permute({2, 0, 3, 1, 4});
  at::Tensor q = qkv[0], k = qkv[1], v = qkv[2];
  if (rotary_) {
    q = rope_.Apply(q, positions);
    k = rope_.Apply(k, positions);
  }
  at::Tensor keys = k, values = v, key_pos = positions.unsqueeze(1);  // [B, 1, T]
  if (cache != nullptr) {
    std::tie(keys, values) = AppendToCache(*cache, k, v, positions);
    key_pos = at::arange(cache->kv_len, positions.options()).view({1, 1, -1});
  }
  // allowed[b, i, j]: key j is at or before query i's position. [B, 1, T, L] after unsqueeze.
  const at::Tensor allowed = (key_pos <= positions.unsqueeze(2)).unsqueeze(1);
  at::Tensor scores =
      at::matmul(q, keys.transpose(-2, -1)) / std::sqrt(static_cast<double>(head_dim_));
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  const at::Tensor out = at::matmul(at::softmax(scores, -1), values);
  return proj_->forward(out.transpose(1, 2).reshape({b, t, d}));
}

MlpImpl::MlpImpl(const ModelConfig& c) {
  fc_ = register_module("fc", torch::nn::Linear(c.d_model, c.mlp_ratio * c.d_model));
  proj_ = register_module("proj", torch::nn::Linear(c.mlp_ratio * c.d_model, c.d_model));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  return proj_->forward(at::gelu(fc_->forward(x)));
}

BlockImpl::BlockImpl(const ModelConfig& c) {
  norm1_ = register_module("norm1", NormLayer(c.d_model, c.norm));
  attn_ = register_module("attn", Attention(c));
  norm2_ = register_module("norm2", NormLayer(c.d_model, c.norm));
  mlp_ = register_module("mlp", Mlp(c));
}

at::Tensor BlockImpl::forward(const at::Tensor& x, const at::Tensor& positions,
                              const CacheView* cache) {
  at::Tensor h = x + attn_->forward(norm1_->forward(x), positions, cache);
  return h + mlp_->forward(norm2_->forward(h));
}

}  // namespace rl::model
