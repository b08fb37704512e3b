#include "rl/model/sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <limits>

#include "rl/model/torch_guard.h"

namespace rl::model {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Keeps the k largest logits of each row; the others become -inf.
at::Tensor TopK(const at::Tensor& logits, int64_t k) {
  if (k <= 0 || k >= logits.size(-1)) return logits;
  const at::Tensor kth = std::get<0>(logits.topk(k, -1)).narrow(-1, k - 1, 1);  // [B, 1]
  return logits.masked_fill(logits < kth, kNegInf);
}

// Keeps, per row, the most likely tokens up to and including the first at which the cumulative
// probability reaches p; the others become -inf. The most likely token always stays.
at::Tensor TopP(const at::Tensor& logits, double p) {
  if (p >= 1.0) return logits;
  const auto sorted = logits.sort(-1, /*descending=*/true);
  const at::Tensor& values = std::get<0>(sorted);
  const at::Tensor& order = std::get<1>(sorted);
  const at::Tensor cumulative = at::softmax(values, -1).cumsum(-1);
  // Drop a token when the tokens before it already reach p.
  const at::Tensor drop_sorted = (cumulative - at::softmax(values, -1)) >= p;
  const at::Tensor drop = at::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
  return logits.masked_fill(drop, kNegInf);
}

// By inverting the cumulative distribution. ATen's multinomial(1) draws V exponentials per row
// instead (the Gumbel-style trick), which on Qwen3's 151936 tokens cost more than the model's whole
// decode step on the CPU; this costs one uniform and one pass over the row.
at::Tensor LoopPicks(const at::Tensor& probs, const at::Tensor& u) {
  const at::Tensor p = probs.contiguous();
  const int64_t rows = p.size(0), vocab = p.size(1);
  at::Tensor ids = at::empty({rows}, at::kLong);
  const float* data = p.data_ptr<float>();
  const double* draw = u.data_ptr<double>();
  int64_t* out = ids.data_ptr<int64_t>();
  for (int64_t b = 0; b < rows; ++b) {
    const float* row = data + b * vocab;
    double total = 0;
    int64_t last_positive = -1;
    for (int64_t v = 0; v < vocab; ++v) {
      total += row[v];
      if (row[v] > 0) last_positive = v;
    }
    const double target = draw[b] * total;
    double cumulative = 0;
    int64_t pick = last_positive;  // rounding can leave the target at the very end
    for (int64_t v = 0; v < vocab; ++v) {
      cumulative += row[v];
      if (cumulative > target && row[v] > 0) {
        pick = v;
        break;
      }
    }
    out[b] = pick < 0 ? 0 : pick;
  }
  return ids;
}

// The same picks from tensor operations, where a loop on the host would first copy [B, V] back:
// the number of cumulative sums at or below the target is the index of the first one above it,
// and that token has a positive probability (the sum rises there). Rounding can leave the target
// at or past the row's end: then the last token with a positive probability, as in the loop.
at::Tensor TensorPicks(const at::Tensor& probs, const at::Tensor& u) {
  const at::Tensor p = probs.to(at::kDouble);
  const at::Tensor cumulative = p.cumsum(-1);
  const at::Tensor target = u.to(p.device()).unsqueeze(1) * cumulative.narrow(-1, p.size(-1) - 1, 1);
  const at::Tensor first_above = (cumulative <= target).sum(-1);
  const at::Tensor index = at::arange(p.size(-1), p.options().dtype(at::kLong)).unsqueeze(0);
  const at::Tensor last_positive = at::where(p > 0, index, at::zeros_like(index)).amax(-1);
  return at::where(first_above < p.size(-1), first_above, last_positive);
}

}  // namespace

at::Tensor InverseCdfPicks(const at::Tensor& probs, const at::Tensor& u, bool tensor_ops) {
  return tensor_ops || !probs.is_cpu() ? TensorPicks(probs, u) : LoopPicks(probs, u);
}

Status SamplingOptions::Validate() const {
  if (!std::isfinite(temperature) || temperature < 0) {
    return Status::InvalidArgument("sampling: temperature must be finite and >= 0");
  }
  if (top_k < 0) return Status::InvalidArgument("sampling: top_k must be >= 0");
  if (!(top_p > 0 && top_p <= 1))
    return Status::InvalidArgument("sampling: top_p must be in (0, 1]");
  return Status::OK();
}

Result<Sampler> Sampler::Create(const SamplingOptions& options, uint64_t seed) {
  RL_RETURN_IF_ERROR(options.Validate());
  return TorchGuard("sampler: create", [&]() -> Result<Sampler> {
    return Sampler(options, at::make_generator<at::CPUGeneratorImpl>(seed));
  });
}

Result<Sample> Sampler::Draw(const at::Tensor& logits) {
  if (!logits.defined() || logits.dim() != 2 || logits.size(0) < 1 || logits.size(1) < 1 ||
      !at::isFloatingType(logits.scalar_type())) {
    return Status::InvalidArgument("sampler: logits must be a non-empty 2-D floating tensor");
  }
  return TorchGuard("sampler: draw", [&]() -> Result<Sample> {
    at::Tensor x = logits.detach().to(at::kFloat);
    at::Tensor ids;
    if (options_.temperature == 0) {
      ids = x.argmax(-1);
    } else {
      if (options_.temperature != 1) x = x / options_.temperature;
      const at::Tensor filtered = TopP(TopK(x, options_.top_k), options_.top_p);
      const at::Tensor u = at::rand({x.size(0)}, gen_, at::TensorOptions().dtype(at::kDouble));
      ids = InverseCdfPicks(at::softmax(filtered, -1), u);
    }
    // log_softmax at the picks only: no second [B, V] tensor.
    const at::Tensor logprobs =
        x.gather(-1, ids.unsqueeze(-1)).squeeze(-1) - at::logsumexp(x, {-1}, /*keepdim=*/false);
    if (x.is_cpu()) return Sample{ids, logprobs};
    return Sample{ids.to(at::kCPU), logprobs.to(at::kCPU)};
  });
}

}  // namespace rl::model
