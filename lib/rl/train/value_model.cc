#include "rl/train/value_model.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "rl/model/torch_guard.h"

namespace rl::train {

Result<ValueModel> ValueModel::FromPolicy(const model::Transformer& policy) {
  RL_ASSIGN_OR_RETURN(model::Transformer backbone, policy.Clone());
  return FromBackbone(std::move(backbone));
}

Result<ValueModel> ValueModel::FromBackbone(model::Transformer backbone) {
  return model::TorchGuard("value model: create", [&]() -> Result<ValueModel> {
    at::Tensor head = at::zeros({1, backbone.config().hidden_size},
                                at::TensorOptions().dtype(model::ScalarTypeOf(backbone.dtype())).device(backbone.device()));
    head.requires_grad_(true);
    return ValueModel(std::move(backbone), std::move(head));
  });
}

Result<at::Tensor> ValueModel::Values(const at::Tensor& tokens, const at::Tensor& routes) const {
  RL_ASSIGN_OR_RETURN(at::Tensor h, backbone_.HiddenStates(tokens, {routes}));
  return model::TorchGuard("value model: values", [&]() -> Result<at::Tensor> {
    return at::matmul(h, head_.t()).squeeze(-1).to(at::kFloat);
  });
}

model::NamedTensors ValueModel::NamedParameters() const {
  model::NamedTensors out = backbone_.NamedParameters();
  out.emplace_back(kValueHeadName, head_);
  return out;
}

Status ValueModel::LoadNamedParameters(const model::NamedTensors& tensors) {
  model::NamedTensors rest;
  const at::Tensor* head = nullptr;
  for (const auto& [name, t] : tensors) {
    if (name != kValueHeadName) {
      rest.emplace_back(name, t);
    } else if (head) {
      return Status::DataError("value model: score.weight given twice");
    } else {
      head = &t;
    }
  }
  if (!head || !head->defined() || !head->sizes().equals(head_.sizes())) {
    return Status::DataError("value model: score.weight missing or not [1, hidden_size]");
  }
  // The backbone checks (and loads) everything else, or changes nothing; the head is copied after.
  RL_RETURN_IF_ERROR(backbone_.LoadNamedParameters(rest));
  return model::TorchGuard("value model: load", [&]() -> Status {
    c10::NoGradGuard no_grad;
    head_.copy_(*head);
    return Status::OK();
  });
}

Status ValueModel::To(const c10::Device& device) {
  RL_RETURN_IF_ERROR(backbone_.To(device));
  return model::TorchGuard("value model: to device", [&]() -> Status {
    head_ = head_.detach().to(device);
    head_.requires_grad_(true);
    return Status::OK();
  });
}

Result<ValueModel> ValueModel::Clone() const {
  RL_ASSIGN_OR_RETURN(model::Transformer backbone, backbone_.Clone());
  return model::TorchGuard("value model: clone", [&]() -> Result<ValueModel> {
    at::Tensor head = head_.detach().clone();
    head.requires_grad_(true);
    return ValueModel(std::move(backbone), std::move(head));
  });
}

}  // namespace rl::train
