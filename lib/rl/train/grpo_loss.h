// The GRPO / PPO-clip objective over padded batches of response tokens.
//
// For response token t of sequence b, with ratio = exp(new_lp - old_lp) (old_lp: the sampling
// policy's log-probability, recorded by the rollout) and the token's advantage A (advantage.h):
//   l = -min(ratio * A, clamp(ratio, 1 - clip, 1 + clip) * A)
//       + kl_coef * k(d),  d = ref_lp - new_lp                           (the KL term)
// with one of Schulman's estimators of KL(new || ref) on tokens the policy sampled
// ("Approximating KL Divergence", 2020):
//   k3  exp(d) - d - 1   (the default; unbiased and low-variance as an estimate, but unbounded in
//                         exp(d) where the policy has moved off a token the older policy sampled)
//   k2  d^2 / 2          (biased as an estimate; as a loss its gradient, -d * grad new_lp, is the
//                         gradient of the KL on the policy's own samples, and it grows as d^2
//                         only, so one crushed token cannot dominate a step)
// k1 (-d) is not offered: as a loss its gradient is -grad new_lp, the score function, whose
// expectation is zero; it regularises nothing.
// Off-policy corrections (behaviour = old_lp, what the rollout sampled with; proximal = prox_lp,
// the trainer's weights before this step's first update, without gradient; w capped at C):
//   none       as above
//   tis        l = -min(exp(new - old), C) A new_lp, the weight without gradient (truncated
//              importance sampling: a policy gradient, no clip)
//   decoupled  l = -min(exp(prox - old), C) min(r A, clamp(r, 1 - clip, 1 + clip) A),
//              r = exp(new - prox) (decoupled PPO: clip against the proximal policy, weight by the
//              capped behaviour ratio)
// The KL term is added as above in every case.
// The critic's loss (PPO with GAE), per token, with V the critic's value now, V_old its value
// before the step's first update, R the GAE return (advantage.h) and c the value clip:
//   l_v = 0.5 max((V - R)^2, (clamp(V, V_old - c, V_old + c) - R)^2)      (c <= 0: 0.5 (V - R)^2)
// aggregated as token-mean over the (mini)batch.
// Aggregation over a batch or minibatch (which may arrive in several pieces, see LossSums), with
// the names verl gives them (B sequences, T_b response tokens of sequence b, C a constant):
//   token-mean               sum_b sum_t l / sum_b T_b              (also "token"; the default)
//   seq-mean-token-mean      sum_b (sum_t l / T_b) / B              (also "sequence")
//   seq-mean-token-sum       sum_b sum_t l / B
//   seq-mean-token-sum-norm  sum_b sum_t l / (B * C)                (Dr. GRPO: C the token budget)
// Thread safety: free functions over tensors.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/transformer.h"
#include "rl/train/sample.h"

namespace rl::train {

enum class LossNorm { kToken, kSequence, kSequenceSum, kSequenceSumNorm };
enum class Correction { kNone, kTis, kDecoupled };
enum class KlEstimator { kK3, kK2 };

// "k3" or "k2"; InvalidArgument otherwise.
Result<KlEstimator> ParseKlEstimator(const std::string& name);

// "none", "tis" or "decoupled"; InvalidArgument otherwise.
Result<Correction> ParseCorrection(const std::string& name);

struct OffPolicy {
  Correction kind = Correction::kNone;
  double cap = 2.0;  // C
};

// The names above (and "token", "sequence"); InvalidArgument otherwise.
Result<LossNorm> ParseLossNorm(const std::string& name);
// The denominator of the aggregation for `tokens` tokens in `sequences` sequences (constant: C).
double LossDenominator(LossNorm norm, double tokens, double sequences, double constant);

// The numerator of the loss for a piece of a batch, and what the denominators need.
struct LossSums {
  at::Tensor sum;        // scalar, differentiable: sum of l, or of per-sequence means (seq-mean-token-mean)
  double tokens = 0;     // response tokens in the piece
  double sequences = 0;  // sequences with at least one response token
  double clipped = 0;    // tokens whose ratio was clipped (the min chose the clamped term)
  double kl = 0;         // sum of the KL estimate over tokens (0 without a reference)
  // The importance weights of a correction (before the cap) over tokens: sum, largest, and how
  // many the cap cut. All 0 without a correction.
  double weight_sum = 0, weight_max = 0, capped = 0;
};

// new_lp, old_lp, mask: [B, T] float32 (mask 1 on response tokens); adv: [B] (one advantage per
// sequence) or [B, T] (per token). ref_lp undefined
// for no KL term; prox_lp [B, T] is needed by the decoupled correction only. InvalidArgument on
// shape mismatches.
Result<LossSums> PolicyLossSums(const at::Tensor& new_lp, const at::Tensor& old_lp,
                                const at::Tensor& mask, const at::Tensor& adv, double clip,
                                LossNorm norm, const at::Tensor& ref_lp, double kl_coef,
                                const OffPolicy& off = {}, const at::Tensor& prox_lp = {},
                                KlEstimator kl = KlEstimator::kK3);

// The value loss's numerator over a piece: the sum of l_v, its tokens, and the tokens whose clipped
// term was the larger (the clip acted).
struct ValueSums {
  at::Tensor sum;  // scalar, differentiable through values
  double tokens = 0, clipped = 0;
};
// values, old_values, returns, mask: [B, T] float32. InvalidArgument on shape mismatches.
Result<ValueSums> ValueLoss(const at::Tensor& values, const at::Tensor& old_values, const at::Tensor& returns,
                            const at::Tensor& mask, double value_clip);

// The padded token matrices of a list of samples: row b holds prompt_ids + response_ids
// right-padded with pad_id; position p of the [B, L-1] matrices is the prediction of token p+1.
struct TokenBatch {
  at::Tensor tokens;  // [B, L] int64
  at::Tensor mask;    // [B, L-1] float32, 1 where token p+1 is a response token (its loss_mask)
  at::Tensor old_lp;  // [B, L-1] float32, the recorded logprobs at those positions (0 elsewhere)
  // Routing replay: [B, L, S, k] int64, the samples' routes (Sample::routes), -1 where a token has
  // none; undefined when no sample has routes or `route_shape` was not given.
  at::Tensor routes;
};
// route_shape: {S, k} of the model, to gather the samples' routes; empty: none.
TokenBatch MakeTokenBatch(const std::vector<const Sample*>& samples, int64_t pad_id,
                          const std::vector<int64_t>& route_shape = {});

// log_softmax(model(tokens))[b, p, tokens[b, p+1]]: [B, L-1], differentiable when grad mode is on.
Result<at::Tensor> TokenLogprobs(const model::Transformer& model, const at::Tensor& tokens);
// The same where mask [B, L-1] is nonzero (0 elsewhere), with the LM head on those positions
// only (model::Transformer::MaskedTokenLogprobs), of logits / temperature: what training uses.
// routes: TokenBatch::routes, replayed (model::Routes) when defined; own, when given, is set to
// the experts the routers picked themselves (model::Routes::record).
Result<at::Tensor> TokenLogprobs(const model::Transformer& model, const at::Tensor& tokens, const at::Tensor& mask,
                                 double temperature = 1.0, const at::Tensor& routes = {}, at::Tensor* own = nullptr);

// Routing replay's agreement: of the (token, sparse layer) entries `replayed` gives experts for
// ([B, L, S, k], -1 rows free), how many the router picked itself as a set (`own`, same shape).
struct RouteAgreement {
  int64_t agreed = 0, replayed = 0;
};
RouteAgreement AgreementOf(const at::Tensor& replayed, const at::Tensor& own);

}  // namespace rl::train
