// Sampler: picks the next token of each batch row from its logits, and reports the policy's
// log-probability of the pick.
//
// Sampling distribution: softmax(logits / temperature), restricted to the top_k largest
// (top_k 0: no limit), then to the smallest set of the most likely tokens whose probability
// reaches top_p (top_p 1: no limit), renormalized, and drawn from with the sampler's own
// generator. temperature 0 is greedy: the argmax, with no random draw.
//
// Reported log-probability: log_softmax(logits / temperature)[chosen], the tempered policy that
// was sampled from, before top_k/top_p truncation (the trainer recomputes the same quantity with
// gradients at the same temperature, so the PPO/GRPO ratio compares like with like; a truncated
// distribution is not modelled, which is why rl-rollout run refuses top_k/top_p). Greedy
// (temperature 0) reports the model's own log_softmax(logits)[chosen].
//
// Device: logits may be on a GPU; the filtering and the draw run there (the uniform draws come from
// the sampler's CPU generator, one per row, so a seed means the same thing on every device), and
// only the picks and their log-probabilities come back to the host.
//
// Determinism: the same seed, options and sequence of logits give the same picks.
// Thread safety: a Sampler owns its generator; use one Sampler per thread. This header includes
// only the ATen tensor and generator types.
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "rl/core/status.h"

namespace rl::model {

struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: all tokens
  double top_p = 1.0;        // in (0, 1]

  // InvalidArgument for a negative or non-finite temperature, negative top_k, top_p outside (0, 1].
  Status Validate() const;
};

struct Sample {  // on the CPU, whatever the logits' device
  at::Tensor ids;       // [B] int64
  at::Tensor logprobs;  // [B] float32: log_softmax(logits / temperature)[b, ids[b]] (temperature 0: 1)
};

// One pick per row of probs [B, V] (float, rows summing to about 1, zeros where filtered out) at
// the uniform draws u [B] (double, CPU): the first token whose cumulative probability exceeds u[b]
// times the row's total. A loop over the row on the CPU; tensor operations on another device
// (cumulative sums in float64), or on the CPU when `tensor_ops` (how a test compares the two).
at::Tensor InverseCdfPicks(const at::Tensor& probs, const at::Tensor& u, bool tensor_ops = false);

class Sampler {
 public:
  // InvalidArgument if the options are invalid.
  static Result<Sampler> Create(const SamplingOptions& options, uint64_t seed);

  // logits [B, V] floating point -> one pick per row. InvalidArgument for another shape.
  Result<Sample> Draw(const at::Tensor& logits);

  const SamplingOptions& options() const { return options_; }

 private:
  Sampler(const SamplingOptions& options, at::Generator gen)
      : options_(options), gen_(std::move(gen)) {}
  SamplingOptions options_;
  at::Generator gen_;
};

}  // namespace rl::model
