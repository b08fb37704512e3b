// AdamW (decoupled weight decay, Loshchilov & Hutter) over named parameters, with its state in
// plain named tensors so that a checkpoint holds it bit for bit, and global-norm gradient clipping.
//
// Update of each parameter p with gradient g at step t (1-based):
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * wd * p;  p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// the same arithmetic as torch.optim.AdamW (amsgrad off).
//
// Mixed precision: parameters in bfloat16 or float16 get float32 master copies. The update runs on
// the masters (gradients converted to float32), m and v are float32, and the parameters receive the
// masters rounded to their dtype after each step: small updates accumulate in the masters instead
// of vanishing in a 8-bit mantissa. The masters and moments live on the parameters' device.
// Thread safety: none; the parameters must not be used by another thread during Step.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "rl/core/status.h"
#include "rl/model/transformer.h"

namespace rl::train {

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
};

class AdamW {
 public:
  // REQUIRES: params share storage with the model being trained (Transformer::NamedParameters).
  // masters_from: float32 values to start the masters from (the weights before they were rounded to
  // the parameters' dtype), by the same names; empty: the parameters' own values.
  AdamW(model::NamedTensors params, AdamWOptions options, const model::NamedTensors& masters_from = {});

  // One update from the parameters' .grad() (a parameter without a gradient is skipped).
  Status Step(double lr);
  // Clears every parameter's gradient.
  void ZeroGrad();
  // Scales every gradient by `factor`.
  void ScaleGrad(double factor);
  // Global L2 norm of the gradients, scaled down to max_norm when above it (max_norm <= 0: no
  // clipping). Returns the norm before clipping.
  double ClipGradNorm(double max_norm);

  int64_t steps() const { return t_; }
  // "m.<name>" and "v.<name>" for every parameter, and with masters "master.<name>": host copies
  // (device.h's HostCopy: the device-to-host copy is the blocking part of a checkpoint).
  model::NamedTensors State() const;
  bool mixed() const { return !masters_.empty(); }
  // The float32 weights the updates apply to: the masters when mixed, else the parameters.
  model::NamedTensors Weights() const;
  // Copies Weights() into the parameters (after something wrote the masters, e.g. a broadcast).
  void PushWeights();
  // Restores State(); DataError when names or shapes do not match, and nothing changes then.
  Status LoadState(const model::NamedTensors& state, int64_t steps);

 private:
  model::NamedTensors params_;
  std::vector<at::Tensor> masters_;  // float32, empty unless the parameters are 16-bit
  std::vector<at::Tensor> m_, v_;
  AdamWOptions options_;
  int64_t t_ = 0;
};

// Rounds *model to bfloat16 for mixed-precision training and returns what AdamW's masters start
// from: copies of its float32 weights (empty when it was 16-bit already: the masters then start
// from the parameters). Internal on a libtorch failure.
Result<model::NamedTensors> ToBf16KeepingMasters(model::Transformer* model);

}  // namespace rl::train
