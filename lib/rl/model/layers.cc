#include "rl/model/layers.h"

#include <ATen/ATen.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

namespace rl::model {
namespace {

torch::nn::Linear MakeLinear(int64_t in, int64_t out, bool bias) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(bias));
}

}  // namespace

RmsNormImpl::RmsNormImpl(int64_t dim, double eps) : eps_(eps) {
  weight_ = register_parameter("weight", at::ones({dim}));
}

at::Tensor RmsNormImpl::forward(const at::Tensor& x) {
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps_);
  return weight_ * normed.to(x.scalar_type());
}

at::Tensor RotaryInverseFrequencies(const ModelConfig& c) {
  const int64_t dim = c.head_width();
  at::Tensor inv_freq =
      at::pow(c.rope_theta, -at::arange(0, dim, 2, at::kDouble) / static_cast<double>(dim));
  const RopeScaling& r = c.rope_scaling;
  if (!r.llama3) return inv_freq;
  // transformers' _compute_llama3_parameters: long wavelengths are divided by `factor`, short ones
  // kept, and those between blended smoothly.
  const double old_len = static_cast<double>(r.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / r.low_freq_factor;
  const double high_freq_wavelen = old_len / r.high_freq_factor;
  const at::Tensor wavelen = 2 * M_PI / inv_freq;
  at::Tensor scaled = at::where(wavelen > low_freq_wavelen, inv_freq / r.factor, inv_freq);
  const at::Tensor smooth =
      (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  const at::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  const at::Tensor medium = (wavelen >= high_freq_wavelen).logical_and(wavelen <= low_freq_wavelen);
  return at::where(medium, smoothed, scaled);
}

Rotary::Rotary(const ModelConfig& c) {
  const at::Tensor inv_freq = RotaryInverseFrequencies(c);
  const at::Tensor angles =
      at::arange(0, c.context(), at::kDouble).unsqueeze(1) * inv_freq.unsqueeze(0);
  cos_ = angles.cos().to(at::kFloat);
  sin_ = angles.sin().to(at::kFloat);
}

Rotary Rotary::On(const at::Device& device) const {
  Rotary moved;
  moved.cos_ = cos_.to(device);
  moved.sin_ = sin_.to(device);
  return moved;
}

at::Tensor Rotary::Apply(const at::Tensor& x, const at::Tensor& positions) const {
  const int64_t b = positions.size(0), t = positions.size(1), half = cos_.size(1);
  const at::Tensor flat = positions.reshape({-1});
  const at::Tensor c = cos_.index_select(0, flat).view({b, 1, t, half}).to(x.scalar_type());
  const at::Tensor s = sin_.index_select(0, flat).view({b, 1, t, half}).to(x.scalar_type());
  const at::Tensor x1 = x.narrow(-1, 0, half), x2 = x.narrow(-1, half, half);
  return at::cat({x1 * c - x2 * s, x1 * s + x2 * c}, -1);
}

AttentionImpl::AttentionImpl(const ModelConfig& c, const TensorParallel& tp, SharedRotary rope)
    : n_heads_(c.num_attention_heads / tp.size),
      n_kv_heads_(c.kv_heads() / tp.size),
      head_dim_(c.head_width()),
      tp_(tp),
      rope_(std::move(rope)) {
  const int64_t d = c.hidden_size, q = n_heads_ * head_dim_, kv = n_kv_heads_ * head_dim_;
  q_proj_ = register_module("q_proj", MakeLinear(d, q, c.qkv_bias()));
  k_proj_ = register_module("k_proj", MakeLinear(d, kv, c.qkv_bias()));
  v_proj_ = register_module("v_proj", MakeLinear(d, kv, c.qkv_bias()));
  o_proj_ = register_module("o_proj", MakeLinear(q, d, c.o_bias()));
  if (c.qk_norm()) {
    q_norm_ = register_module("q_norm", RmsNorm(head_dim_, c.rms_norm_eps));
    k_norm_ = register_module("k_norm", RmsNorm(head_dim_, c.rms_norm_eps));
  }
}

namespace {

// Writes k and v ([B, G, T, Dh]) into the cache at (slot of row b, positions[b, i]) and returns
// the keys and values each row attends over ([B, G, kv_len, Dh]).
std::pair<at::Tensor, at::Tensor> AppendToCache(const CacheView& cache, const at::Tensor& k,
                                                const at::Tensor& v, const at::Tensor& positions) {
  using at::indexing::Slice;
  const at::Tensor rows = cache.slots.view({-1, 1}).expand_as(positions);
  // Advanced indices at dims 0 and 2 put their broadcast shape [B, T] first: values [B, T, G, Dh].
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
  const int64_t b = x.size(0), t = x.size(1), rep = n_heads_ / n_kv_heads_;
  at::Tensor q = q_proj_->forward(x).view({b, t, n_heads_, head_dim_});
  at::Tensor k = k_proj_->forward(x).view({b, t, n_kv_heads_, head_dim_});
  const at::Tensor v = v_proj_->forward(x).view({b, t, n_kv_heads_, head_dim_}).transpose(1, 2);
  if (q_norm_) {
    q = q_norm_->forward(q);
    k = k_norm_->forward(k);
  }
  q = rope_->Apply(q.transpose(1, 2), positions);  // [B, H, T, Dh], contiguous (a cat)
  k = rope_->Apply(k.transpose(1, 2), positions);  // [B, G, T, Dh]
  at::Tensor keys = k, values = v, key_pos = positions.unsqueeze(1);  // [B, 1, T]
  if (cache != nullptr) {
    std::tie(keys, values) = AppendToCache(*cache, k, v, positions);
    key_pos = at::arange(cache->kv_len, positions.options()).view({1, 1, -1});
  }
  const int64_t len = keys.size(2);
  // Grouped-query attention: query head h reads key/value head h / rep. Grouping the queries as
  // [B, G, rep * T, Dh] lets each group's rep heads share its keys without copying them.
  const at::Tensor grouped = q.reshape({b, n_kv_heads_, rep * t, head_dim_});
  at::Tensor scores =
      at::matmul(grouped, keys.transpose(-2, -1)).view({b, n_kv_heads_, rep, t, len});
  scores = scores * (1.0 / std::sqrt(static_cast<double>(head_dim_)));
  // allowed[b, i, j]: key j is at or before query i's position. [B, 1, 1, T, L] after unsqueeze.
  const at::Tensor allowed = (key_pos <= positions.unsqueeze(2)).unsqueeze(1).unsqueeze(1);
  scores = scores.masked_fill(allowed.logical_not(), -std::numeric_limits<float>::infinity());
  const at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  const at::Tensor out = at::matmul(probs.view({b, n_kv_heads_, rep * t, len}), values)
                             .view({b, n_heads_, t, head_dim_});
  at::Tensor y = o_proj_->forward(out.transpose(1, 2).reshape({b, t, n_heads_ * head_dim_}));
  if (tp_.size > 1) tp_.all_reduce(y);
  return y;
}

MlpImpl::MlpImpl(int64_t hidden, int64_t intermediate, const TensorParallel& tp, bool reduce,
                 const MlpNames& names)
    : tp_(tp), reduce_(reduce) {
  const int64_t inner = intermediate / tp.size;
  gate_proj_ = register_module(names.gate, MakeLinear(hidden, inner, false));
  up_proj_ = register_module(names.up, MakeLinear(hidden, inner, false));
  down_proj_ = register_module(names.down, MakeLinear(inner, hidden, false));
}

at::Tensor MlpImpl::forward(const at::Tensor& x) {
  at::Tensor y = down_proj_->forward(at::silu(gate_proj_->forward(x)) * up_proj_->forward(x));
  if (reduce_ && tp_.size > 1) tp_.all_reduce(y);
  return y;
}

SparseMoeImpl::SparseMoeImpl(const ModelConfig& c, const TensorParallel& tp)
    : tp_(tp), top_k_(c.moe.num_experts_per_tok), norm_topk_prob_(c.moe.norm_topk_prob) {
  gate_ = register_module("gate", MakeLinear(c.hidden_size, c.moe.num_experts, false));
  experts_ = register_module("experts", torch::nn::ModuleList());
  for (int64_t e = 0; e < c.moe.num_experts; ++e) {
    const MlpNames& names = c.architecture == Architecture::kMixtral ? kMixtralExpertNames : kMlpNames;
    expert_list_.push_back(Mlp(c.hidden_size, c.moe.moe_intermediate_size, tp, /*reduce=*/false, names));
    experts_->push_back(expert_list_.back());
  }
}

at::Tensor SparseMoeImpl::forward(const at::Tensor& x, const RouteSlot& route) {
  const at::Tensor flat = x.reshape({-1, x.size(-1)});  // [N, D]
  const at::Tensor probs = at::softmax(gate_->forward(flat), -1, at::kFloat);  // [N, E]
  auto [weights, chosen] = probs.topk(top_k_, -1);  // [N, k] each
  if (route.record != nullptr) *route.record = chosen;  // the router's own, before any replay
  if (route.replay != nullptr) {
    const at::Tensor replay = route.replay->to(chosen.device());
    TORCH_CHECK(replay.sizes() == chosen.sizes(), "routing replay: ", replay.sizes(), " experts for ",
                chosen.sizes(), " routes");
    const at::Tensor replayed = replay.select(1, 0).ge(0).unsqueeze(1);  // [N, 1]
    chosen = at::where(replayed, replay, chosen);
    weights = probs.gather(1, chosen);
  }
  if (norm_topk_prob_) weights = weights / weights.sum(-1, /*keepdim=*/true);
  // The N * k (token, expert) pairs sorted by expert, so that each expert takes its tokens as one
  // contiguous batch; how many each has is the one copy to the host (a GPU would otherwise
  // synchronize once per expert).
  const at::Tensor pairs = std::get<1>(at::sort(chosen.reshape({-1}), c10::optional<bool>(true), 0));
  const int64_t n_experts = static_cast<int64_t>(expert_list_.size());
  const at::Tensor counts = at::bincount(chosen.reshape({-1}), {}, n_experts).cpu();
  const int64_t* count = counts.data_ptr<int64_t>();
  const at::Tensor tokens = at::floor_divide(pairs, top_k_);
  const at::Tensor inputs = flat.index_select(0, tokens);
  const at::Tensor scale = weights.reshape({-1}).index_select(0, pairs).to(x.scalar_type()).unsqueeze(1);
  std::vector<at::Tensor> outputs;
  for (int64_t e = 0, offset = 0; e < n_experts; offset += count[e++]) {
    if (count[e] == 0) continue;
    outputs.push_back(expert_list_[static_cast<size_t>(e)]->forward(inputs.narrow(0, offset, count[e])));
  }
  at::Tensor out = at::zeros_like(flat);
  if (!outputs.empty()) out = out.index_add(0, tokens, at::cat(outputs) * scale);  // none: no tokens
  if (tp_.size > 1) tp_.all_reduce(out);
  return out.view(x.sizes());
}

DecoderLayerImpl::DecoderLayerImpl(const ModelConfig& c, const TensorParallel& tp, int64_t index,
                                   SharedRotary rope) {
  self_attn_ = register_module("self_attn", Attention(c, tp, std::move(rope)));
  if (c.SparseLayer(index)) {
    moe_ = register_module(c.architecture == Architecture::kMixtral ? "block_sparse_moe" : "mlp", SparseMoe(c, tp));
  } else {
    mlp_ = register_module("mlp", Mlp(c.hidden_size, c.intermediate_size, tp));
  }
  input_layernorm_ = register_module("input_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps));
  post_attention_layernorm_ =
      register_module("post_attention_layernorm", RmsNorm(c.hidden_size, c.rms_norm_eps));
}

at::Tensor DecoderLayerImpl::forward(const at::Tensor& x, const at::Tensor& positions,
                                     const CacheView* cache, const RouteSlot& route) {
  const at::Tensor h = x + self_attn_->forward(input_layernorm_->forward(x), positions, cache);
  const at::Tensor normed = post_attention_layernorm_->forward(h);
  return h + (moe_ ? moe_->forward(normed, route) : mlp_->forward(normed));
}

}  // namespace rl::model
