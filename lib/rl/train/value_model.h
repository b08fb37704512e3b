// ValueModel: the critic of PPO. A decoder-only backbone (the policy's architecture) and a scalar
// head over its hidden states, laid out as Hugging Face's *ForTokenClassification with one label:
//
//   tokens [B, T] -> backbone (model.*, as transformer_module.h) -> h [B, T, D]
//                 -> score.weight [1, D] -> V [B, T] = h . score
//
// V at position p is the value of the state after tokens 0..p: the expected outcome reward of a
// response continued from there. The backbone is a copy of the policy (FromPolicy) or a model of
// its own, usually smaller, that reads the same token ids (FromBackbone; rl-train --critic-config). The backbone's LM head (lm_head.weight, untied models only) is
// kept so that the backbone loads and saves as a whole model, but never gets a gradient.
// Thread safety: as model::Transformer (a shared handle; Clone makes an independent copy).
#pragma once

#include <ATen/core/Tensor.h>

#include "rl/core/status.h"
#include "rl/model/transformer.h"

namespace rl::train {

constexpr char kValueHeadName[] = "score.weight";

class ValueModel {
 public:
  // A critic whose backbone is an independent copy of `policy` and whose head is zero: every value
  // is 0 until it learns (GAE then starts from the plain reward-to-go).
  static Result<ValueModel> FromPolicy(const model::Transformer& policy);
  // A critic over `backbone` as it is (taken, not copied), with a zero head.
  static Result<ValueModel> FromBackbone(model::Transformer backbone);

  // [B, T] float32 values of every position of tokens [B, T]; records gradients in grad mode.
  // `routes`: experts a mixture-of-experts backbone replays (model::Routes::replay; undefined:
  // its own routing).
  Result<at::Tensor> Values(const at::Tensor& tokens, const at::Tensor& routes = {}) const;
  const model::ModelConfig& config() const { return backbone_.config(); }

  // The backbone's parameters under their names, then score.weight; they share storage.
  model::NamedTensors NamedParameters() const;
  // Copies tensors in, as model::Transformer::LoadNamedParameters (every name once, shapes equal);
  // DataError on a mismatch, and then nothing has changed.
  Status LoadNamedParameters(const model::NamedTensors& tensors);
  Result<ValueModel> Clone() const;
  // Moves the backbone and the head to `device` (before an optimizer takes the parameters).
  Status To(const c10::Device& device);

 private:
  ValueModel(model::Transformer backbone, at::Tensor head) : backbone_(std::move(backbone)), head_(std::move(head)) {}
  model::Transformer backbone_;
  at::Tensor head_;  // [1, D] in the backbone's dtype, a leaf that requires grad
};

}  // namespace rl::train
