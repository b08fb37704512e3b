#include "rl/train/adamw.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <map>

#include "rl/model/torch_guard.h"

namespace rl::train {

AdamW::AdamW(model::NamedTensors params, AdamWOptions options)
    : params_(std::move(params)), options_(options) {
  for (const auto& [name, p] : params_) {
    m_.push_back(at::zeros_like(p));
    v_.push_back(at::zeros_like(p));
  }
}

Status AdamW::Step(double lr) {
  return model::TorchGuard("adamw step", [&]() -> Status {
    c10::NoGradGuard no_grad;
    ++t_;
    double bc1 = 1 - std::pow(options_.beta1, static_cast<double>(t_));
    double bc2 = 1 - std::pow(options_.beta2, static_cast<double>(t_));
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor p = params_[i].second;
      const at::Tensor& g = p.grad();
      if (!g.defined()) continue;
      if (options_.weight_decay != 0) p.mul_(1 - lr * options_.weight_decay);
      m_[i].mul_(options_.beta1).add_(g, 1 - options_.beta1);
      v_[i].mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
      at::Tensor denom = (v_[i].sqrt() / std::sqrt(bc2)).add_(options_.eps);
      p.addcdiv_(m_[i], denom, -lr / bc1);
    }
    return Status::OK();
  });
}

void AdamW::ZeroGrad() {
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) p.mutable_grad() = at::Tensor();
  }
}

void AdamW::ScaleGrad(double factor) {
  c10::NoGradGuard no_grad;
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) p.mutable_grad().mul_(factor);
  }
}

double AdamW::ClipGradNorm(double max_norm) {
  c10::NoGradGuard no_grad;
  double sq = 0;
  for (auto& [name, p] : params_) {
    if (p.grad().defined()) sq += p.grad().pow(2).sum().item<double>();
  }
  double norm = std::sqrt(sq);
  if (max_norm > 0 && norm > max_norm) ScaleGrad(max_norm / (norm + 1e-6));
  return norm;
}

model::NamedTensors AdamW::State() const {
  model::NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back("m." + params_[i].first, m_[i].clone());
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back("v." + params_[i].first, v_[i].clone());
  return out;
}

Status AdamW::LoadState(const model::NamedTensors& state, int64_t steps) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  if (by_name.size() != 2 * params_.size()) return Status::DataError("optimizer state has the wrong tensors");
  for (size_t i = 0; i < params_.size(); ++i) {
    for (const char* kind : {"m.", "v."}) {
      auto it = by_name.find(kind + params_[i].first);
      if (it == by_name.end() || !it->second.sizes().equals(params_[i].second.sizes())) {
        return Status::DataError(std::string("optimizer state lacks ") + kind + params_[i].first);
      }
    }
  }
  return model::TorchGuard("adamw load", [&]() -> Status {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      m_[i].copy_(by_name["m." + params_[i].first]);
      v_[i].copy_(by_name["v." + params_[i].first]);
    }
    t_ = steps;
    return Status::OK();
  });
}

}  // namespace rl::train
