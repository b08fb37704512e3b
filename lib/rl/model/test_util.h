// Helpers shared by the tests of lib/rl/model (not part of the library).
#pragma once

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include "rl/model/config.h"
#include "rl/model/transformer.h"

namespace rl::model::testing {

// Every test binary runs libtorch on one thread: the machine is shared, and results stay
// reproducible.
inline const bool kSingleThreaded = (at::set_num_threads(1), true);

inline ModelConfig TinyConfig(Positions positions, Norm norm = Norm::kLayerNorm, bool tied = true) {
  ModelConfig c;
  c.vocab_size = 15;
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.context = 16;
  c.positions = positions;
  c.norm = norm;
  c.tie_embeddings = tied;
  return c;
}

// Multiplies every weight by `factor`: freshly initialized weights are small, so attention is
// nearly uniform; larger ones make a test sensitive to which positions a query sees.
inline void ScaleWeights(Transformer* model, double factor) {
  c10::NoGradGuard no_grad;
  for (at::Tensor& p : model->Parameters()) p.mul_(factor);
}

}  // namespace rl::model::testing
