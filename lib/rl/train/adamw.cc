#include "rl/train/adamw.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <map>

#include "rl/model/device.h"
#include "rl/model/torch_guard.h"

namespace rl::train {

AdamW::AdamW(model::NamedTensors params, AdamWOptions options, const model::NamedTensors& masters_from)
    : params_(std::move(params)), options_(options) {
  c10::NoGradGuard no_grad;
  std::map<std::string, at::Tensor> from(masters_from.begin(), masters_from.end());
  const bool mixed = !params_.empty() && params_.front().second.scalar_type() != at::kFloat;
  for (const auto& [name, p] : params_) {
    if (mixed) {
      auto it = from.find(name);
      const at::Tensor& start = it != from.end() && it->second.sizes() == p.sizes() ? it->second : p;
      masters_.push_back(start.detach().to(p.device(), at::kFloat, /*non_blocking=*/false, /*copy=*/true));
    }
    m_.push_back(at::zeros_like(p, p.options().dtype(at::kFloat)));
    v_.push_back(at::zeros_like(p, p.options().dtype(at::kFloat)));
  }
  if (mixed) PushWeights();
}

model::NamedTensors AdamW::Weights() const {
  if (!mixed()) return params_;
  model::NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back(params_[i].first, masters_[i]);
  return out;
}

void AdamW::PushWeights() {
  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < masters_.size(); ++i) params_[i].second.copy_(masters_[i]);
}

Status AdamW::Step(double lr) {
  return model::TorchGuard("adamw step", [&]() -> Status {
    c10::NoGradGuard no_grad;
    ++t_;
    double bc1 = 1 - std::pow(options_.beta1, static_cast<double>(t_));
    double bc2 = 1 - std::pow(options_.beta2, static_cast<double>(t_));
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor p = mixed() ? masters_[i] : params_[i].second;
      const at::Tensor& grad = params_[i].second.grad();
      if (!grad.defined()) continue;
      const at::Tensor g = grad.to(at::kFloat);
      if (options_.weight_decay != 0) p.mul_(1 - lr * options_.weight_decay);
      m_[i].mul_(options_.beta1).add_(g, 1 - options_.beta1);
      v_[i].mul_(options_.beta2).addcmul_(g, g, 1 - options_.beta2);
      at::Tensor denom = (v_[i].sqrt() / std::sqrt(bc2)).add_(options_.eps);
      p.addcdiv_(m_[i], denom, -lr / bc1);
      if (mixed()) params_[i].second.copy_(p);
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
  at::Tensor sq;  // summed where the gradients are: one read back, not one per parameter
  for (auto& [name, p] : params_) {
    if (!p.grad().defined()) continue;
    at::Tensor s = p.grad().to(at::kFloat).pow(2).sum().to(at::kDouble);
    sq = sq.defined() ? sq + s : s;
  }
  double norm = sq.defined() ? std::sqrt(sq.item<double>()) : 0.0;
  if (max_norm > 0 && norm > max_norm) ScaleGrad(max_norm / (norm + 1e-6));
  return norm;
}

model::NamedTensors AdamW::State() const {
  model::NamedTensors out;
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back("m." + params_[i].first, model::HostCopy(m_[i]));
  for (size_t i = 0; i < params_.size(); ++i) out.emplace_back("v." + params_[i].first, model::HostCopy(v_[i]));
  for (size_t i = 0; i < masters_.size(); ++i) {
    out.emplace_back("master." + params_[i].first, model::HostCopy(masters_[i]));
  }
  return out;
}

Status AdamW::LoadState(const model::NamedTensors& state, int64_t steps) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  // Masters are optional: a checkpoint of pure 16-bit training (no masters) resumes with masters
  // from its parameters, and one with masters resumes a float32 run from them.
  size_t masters = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    for (const char* kind : {"m.", "v.", "master."}) {
      auto it = by_name.find(kind + params_[i].first);
      if (it == by_name.end() && std::string(kind) == "master.") continue;
      if (it == by_name.end() || !it->second.sizes().equals(params_[i].second.sizes())) {
        return Status::DataError(std::string("optimizer state lacks ") + kind + params_[i].first);
      }
      if (std::string(kind) == "master.") ++masters;
    }
  }
  if (by_name.size() != 2 * params_.size() + masters || (masters != 0 && masters != params_.size())) {
    return Status::DataError("optimizer state has the wrong tensors");
  }
  return model::TorchGuard("adamw load", [&]() -> Status {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      m_[i].copy_(by_name["m." + params_[i].first]);
      v_[i].copy_(by_name["v." + params_[i].first]);
      if (masters != 0) (mixed() ? masters_[i] : params_[i].second).copy_(by_name["master." + params_[i].first]);
    }
    PushWeights();
    t_ = steps;
    return Status::OK();
  });
}

Result<model::NamedTensors> ToBf16KeepingMasters(model::Transformer* model) {
  model::NamedTensors masters;
  if (model->dtype() == model::DType::kF32) {
    RL_RETURN_IF_ERROR(model::TorchGuard("bf16 masters", [&]() -> Status {
      for (const auto& [name, p] : model->NamedParameters()) masters.emplace_back(name, p.detach().clone());
      return Status::OK();
    }));
  }
  RL_RETURN_IF_ERROR(model->ToDType(model::DType::kBF16));
  return masters;
}

}  // namespace rl::train
