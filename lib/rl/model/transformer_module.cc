#include "rl/model/transformer_module.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <string>

#include "rl/model/kv_cache.h"

namespace rl::model {

TransformerImpl::TransformerImpl(const ModelConfig& config) : config_(config) {
  tok_emb_ = register_module("tok_emb", torch::nn::Embedding(config.vocab_size, config.d_model));
  if (config.positions == Positions::kLearned) {
    pos_emb_ = register_module("pos_emb", torch::nn::Embedding(config.context, config.d_model));
  }
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  for (int64_t i = 0; i < config.n_layers; ++i) {
    block_list_.push_back(Block(config));
    blocks_->push_back(block_list_.back());
  }
  norm_f_ = register_module("norm_f", NormLayer(config.d_model, config.norm));
  if (!config.tie_embeddings) {
    lm_head_ = register_module(
        "lm_head",
        torch::nn::Linear(torch::nn::LinearOptions(config.d_model, config.vocab_size).bias(false)));
  }
}

at::Tensor TransformerImpl::forward(const at::Tensor& tokens, const at::Tensor& positions,
                                    KvCache* cache, const at::Tensor& slots, bool all_slots,
                                    int64_t kv_len) {
  at::Tensor x = tok_emb_->forward(tokens);
  if (pos_emb_) x = x + pos_emb_->forward(positions);
  for (size_t i = 0; i < block_list_.size(); ++i) {
    if (cache == nullptr) {
      x = block_list_[i]->forward(x, positions, nullptr);
    } else {
      const auto layer = static_cast<int64_t>(i);
      const CacheView view{cache->keys(layer), cache->values(layer), slots, all_slots, kv_len};
      x = block_list_[i]->forward(x, positions, &view);
    }
  }
  x = norm_f_->forward(x);
  return lm_head_ ? lm_head_->forward(x) : at::matmul(x, tok_emb_->weight.t());
}

void TransformerImpl::InitWeights(uint64_t seed) {
  c10::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std_proj = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.n_layers));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    at::Tensor& p = item.value();
    const bool is_norm = name.find("norm") != std::string::npos;
    const auto ends_with = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    if (is_norm) {
      ends_with(".bias") ? p.zero_() : p.fill_(1.0);
    } else if (ends_with(".bias")) {
      p.zero_();
    } else if (ends_with("proj.weight")) {
      p.normal_(0.0, std_proj, gen);
    } else {
      p.normal_(0.0, 0.02, gen);
    }
  }
}

}  // namespace rl::model
