#include "rl/model/transformer_module.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <string>

#include "rl/model/kv_cache.h"

namespace rl::model {

DecoderStackImpl::DecoderStackImpl(const ModelConfig& config, const TensorParallel& tp) {
  embed_tokens_ =
      register_module("embed_tokens", torch::nn::Embedding(config.vocab_size, config.hidden_size));
  layers_ = register_module("layers", torch::nn::ModuleList());
  rope_ = std::make_shared<const Rotary>(config);
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) {
    layer_list_.push_back(DecoderLayer(config, tp, i, rope_));
    layers_->push_back(layer_list_.back());
  }
  norm_ = register_module("norm", RmsNorm(config.hidden_size, config.rms_norm_eps));
}

at::Tensor DecoderStackImpl::forward(const at::Tensor& tokens, const at::Tensor& positions,
                                     const std::vector<CacheView>& caches, const StackRoutes& routes) {
  at::Tensor x = embed_tokens_->forward(tokens);
  if (routes.record != nullptr) routes.record->clear();
  size_t sparse = 0;
  for (size_t i = 0; i < layer_list_.size(); ++i) {
    RouteSlot route;
    if (layer_list_[i]->sparse()) {
      TORCH_CHECK(routes.replay.empty() || sparse < routes.replay.size(), "routing replay: too few layers");
      if (!routes.replay.empty()) route.replay = &routes.replay[sparse];
      if (routes.record != nullptr) route.record = &routes.record->emplace_back();
      ++sparse;
    }
    x = layer_list_[i]->forward(x, positions, caches.empty() ? nullptr : &caches[i], route);
  }
  return norm_->forward(x);
}

void DecoderStackImpl::MoveTables(const at::Device& device) {
  rope_ = std::make_shared<const Rotary>(rope_->On(device));
  for (DecoderLayer& layer : layer_list_) layer->SetRotary(rope_);
}

TransformerImpl::TransformerImpl(const ModelConfig& config, const TensorParallel& tp)
    : config_(config), tp_(tp) {
  model_ = register_module("model", DecoderStack(config, tp));
  if (!config.tie_word_embeddings) {
    lm_head_ = register_module(
        "lm_head",
        torch::nn::Linear(
            torch::nn::LinearOptions(config.hidden_size, config.vocab_size).bias(false)));
  }
}

at::Tensor TransformerImpl::forward(const at::Tensor& tokens, const at::Tensor& positions,
                                    KvCache* cache, const at::Tensor& slots, bool all_slots,
                                    int64_t kv_len, bool last_only, const StackRoutes& routes) {
  std::vector<CacheView> views;
  if (cache != nullptr) {
    for (int64_t l = 0; l < config_.num_hidden_layers; ++l) {
      views.push_back(CacheView{cache->keys(l), cache->values(l), slots, all_slots, kv_len});
    }
  }
  at::Tensor x = model_->forward(tokens, positions, views, routes);
  if (last_only) x = x.narrow(1, x.size(1) - 1, 1);
  return logits(x);
}

at::Tensor TransformerImpl::hidden(const at::Tensor& tokens, const at::Tensor& positions,
                                   const StackRoutes& routes) {
  return model_->forward(tokens, positions, {}, routes);
}

at::Tensor TransformerImpl::logits(const at::Tensor& x) {
  const at::Tensor logits = lm_head_ ? lm_head_->forward(x) : at::matmul(x, model_->embedding().t());
  return logits.to(at::kFloat);
}

void TransformerImpl::MoveTo(const at::Device& device) {
  to(device);
  model_->MoveTables(device);
}

void TransformerImpl::InitWeights(uint64_t seed) {
  c10::NoGradGuard no_grad;
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  const double std_out = 0.02 / std::sqrt(2.0 * static_cast<double>(config_.num_hidden_layers));
  for (auto& item : named_parameters()) {
    const std::string& name = item.key();
    at::Tensor& p = item.value();
    const auto ends_with = [&](const std::string& suffix) {
      return name.size() >= suffix.size() &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    };
    // Draw in float32 from the CPU generator, whatever the parameter's dtype.
    const auto normal = [&](double std) {
      p.copy_(at::empty(p.sizes(), at::kFloat).normal_(0.0, std, gen));
    };
    if (name.find("norm") != std::string::npos) {
      p.fill_(1.0);
    } else if (ends_with(".bias")) {
      p.zero_();
    } else if (ends_with("o_proj.weight") || ends_with("down_proj.weight") || ends_with(".w2.weight")) {
      normal(std_out);
    } else {
      normal(0.02);
    }
  }
}

}  // namespace rl::model
