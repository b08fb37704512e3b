#include "rl/train/grpo_loss.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "rl/model/torch_guard.h"

namespace rl::train {

Result<LossNorm> ParseLossNorm(const std::string& name) {
  if (name == "token" || name == "token-mean") return LossNorm::kToken;
  if (name == "sequence" || name == "seq-mean-token-mean") return LossNorm::kSequence;
  if (name == "seq-mean-token-sum") return LossNorm::kSequenceSum;
  if (name == "seq-mean-token-sum-norm") return LossNorm::kSequenceSumNorm;
  return Status::InvalidArgument("unknown loss aggregation '" + name +
                                 "' (token-mean, seq-mean-token-mean, seq-mean-token-sum or seq-mean-token-sum-norm)");
}

Result<Correction> ParseCorrection(const std::string& name) {
  if (name == "none") return Correction::kNone;
  if (name == "tis") return Correction::kTis;
  if (name == "decoupled") return Correction::kDecoupled;
  return Status::InvalidArgument("unknown off-policy correction '" + name + "' (none, tis or decoupled)");
}

Result<KlEstimator> ParseKlEstimator(const std::string& name) {
  if (name == "k3") return KlEstimator::kK3;
  if (name == "k2") return KlEstimator::kK2;
  return Status::InvalidArgument("unknown KL estimator '" + name + "' (k3 or k2)");
}

double LossDenominator(LossNorm norm, double tokens, double sequences, double constant) {
  switch (norm) {
    case LossNorm::kToken:
      return tokens;
    case LossNorm::kSequence:
    case LossNorm::kSequenceSum:
      return sequences;
    case LossNorm::kSequenceSumNorm:
      return sequences * constant;
  }
  return tokens;
}

Result<LossSums> PolicyLossSums(const at::Tensor& new_lp, const at::Tensor& old_lp,
                                const at::Tensor& mask, const at::Tensor& adv, double clip,
                                LossNorm norm, const at::Tensor& ref_lp, double kl_coef,
                                const OffPolicy& off, const at::Tensor& prox_lp, KlEstimator estimator) {
  const bool adv_ok = new_lp.dim() == 2 && (adv.dim() == 1 || (adv.dim() == 2 && adv.size(1) == new_lp.size(1))) &&
                      adv.size(0) == new_lp.size(0);
  if (new_lp.dim() != 2 || !new_lp.sizes().equals(old_lp.sizes()) || !new_lp.sizes().equals(mask.sizes()) ||
      !adv_ok || (ref_lp.defined() && !ref_lp.sizes().equals(new_lp.sizes())) ||
      (off.kind == Correction::kDecoupled && (!prox_lp.defined() || !prox_lp.sizes().equals(new_lp.sizes())))) {
    return Status::InvalidArgument("policy loss: mismatched shapes");
  }
  return model::TorchGuard("policy loss", [&]() -> Result<LossSums> {
    LossSums out;
    at::Tensor a = adv.dim() == 1 ? adv.to(at::kFloat).unsqueeze(1) : adv.to(at::kFloat);
    // The importance weight of a correction, without gradient, and the ratio the clip sees.
    at::Tensor weight, base = old_lp;
    if (off.kind == Correction::kTis) weight = at::exp((new_lp.detach() - old_lp) * mask);
    if (off.kind == Correction::kDecoupled) {
      weight = at::exp((prox_lp - old_lp) * mask);
      base = prox_lp;
    }
    at::Tensor ratio = at::exp((new_lp - base) * mask);
    at::Tensor unclipped = ratio * a;
    at::Tensor clipped = at::clamp(ratio, 1 - clip, 1 + clip) * a;
    at::Tensor per_token = -at::min(unclipped, clipped);
    if (weight.defined()) {
      at::Tensor masked = weight * mask;
      out.weight_sum = masked.sum().item<double>();
      out.weight_max = masked.max().item<double>();
      out.capped = ((weight > off.cap).to(at::kFloat) * mask).sum().item<double>();
      at::Tensor w = at::clamp_max(weight, off.cap);
      per_token = off.kind == Correction::kTis ? -w * a * new_lp : w * per_token;
    }
    if (ref_lp.defined() && kl_coef != 0) {
      at::Tensor d = (ref_lp - new_lp) * mask;
      at::Tensor kl = estimator == KlEstimator::kK2 ? 0.5 * d * d : at::exp(d) - d - 1;
      per_token = per_token + kl_coef * kl;
      out.kl = (kl * mask).sum().item<double>();
    }
    per_token = per_token * mask;
    at::Tensor lengths = mask.sum(1);
    out.tokens = lengths.sum().item<double>();
    out.sequences = (lengths > 0).sum().item<double>();
    out.clipped = off.kind == Correction::kTis
                      ? 0.0
                      : ((clipped.detach() < unclipped.detach()).to(at::kFloat) * mask).sum().item<double>();
    if (norm == LossNorm::kSequence) {
      out.sum = (per_token.sum(1) / lengths.clamp_min(1)).sum();
    } else {
      out.sum = per_token.sum();
    }
    return out;
  });
}

Result<ValueSums> ValueLoss(const at::Tensor& values, const at::Tensor& old_values, const at::Tensor& returns,
                            const at::Tensor& mask, double value_clip) {
  if (values.dim() != 2 || !values.sizes().equals(old_values.sizes()) || !values.sizes().equals(returns.sizes()) ||
      !values.sizes().equals(mask.sizes())) {
    return Status::InvalidArgument("value loss: mismatched shapes");
  }
  return model::TorchGuard("value loss", [&]() -> Result<ValueSums> {
    ValueSums out;
    at::Tensor plain = (values - returns).pow(2);
    at::Tensor loss = plain;
    if (value_clip > 0) {
      at::Tensor clipped = (at::clamp(values, old_values - value_clip, old_values + value_clip) - returns).pow(2);
      loss = at::max(plain, clipped);
      out.clipped = ((clipped.detach() > plain.detach()).to(at::kFloat) * mask).sum().item<double>();
    }
    out.sum = 0.5 * (loss * mask).sum();
    out.tokens = mask.sum().item<double>();
    return out;
  });
}

TokenBatch MakeTokenBatch(const std::vector<const Sample*>& samples, int64_t pad_id,
                          const std::vector<int64_t>& route_shape) {
  int64_t b = static_cast<int64_t>(samples.size()), len = 2;
  for (const Sample* s : samples) {
    len = std::max<int64_t>(len, static_cast<int64_t>(s->prompt_ids.size() + s->response_ids.size()));
  }
  TokenBatch out;
  out.tokens = at::full({b, len}, pad_id, at::kLong);
  out.mask = at::zeros({b, len - 1}, at::kFloat);
  out.old_lp = at::zeros({b, len - 1}, at::kFloat);
  auto tok = out.tokens.accessor<int64_t, 2>();
  auto mask = out.mask.accessor<float, 2>();
  auto old = out.old_lp.accessor<float, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const Sample& s = *samples[i];
    int64_t p = static_cast<int64_t>(s.prompt_ids.size());
    for (int64_t j = 0; j < p; ++j) tok[i][j] = s.prompt_ids[j];
    for (size_t j = 0; j < s.response_ids.size(); ++j) {
      tok[i][p + j] = s.response_ids[j];
      mask[i][p + j - 1] = s.loss_mask.empty() ? 1.0f : static_cast<float>(s.loss_mask[j]);
      old[i][p + j - 1] = s.logprobs[j];
    }
  }
  const bool any_routes = std::any_of(samples.begin(), samples.end(), [](const Sample* s) { return !s->routes.empty(); });
  if (route_shape.size() == 2 && any_routes) {
    const int64_t width = route_shape[0] * route_shape[1];
    out.routes = at::full({b, len, route_shape[0], route_shape[1]}, -1, at::kLong);
    int64_t* r = out.routes.data_ptr<int64_t>();
    for (int64_t i = 0; i < b; ++i) {
      const std::vector<int32_t>& routes = samples[static_cast<size_t>(i)]->routes;
      std::copy(routes.begin(), routes.end(), r + i * len * width);  // ReadRoutes bounds it to the row
    }
  }
  return out;
}

Result<at::Tensor> TokenLogprobs(const model::Transformer& model, const at::Tensor& tokens) {
  RL_ASSIGN_OR_RETURN(at::Tensor logits, model.Forward(tokens));
  return model::TorchGuard("token logprobs", [&]() -> Result<at::Tensor> {
    int64_t len = tokens.size(1);
    at::Tensor logp = at::log_softmax(logits.narrow(1, 0, len - 1), -1);
    const at::Tensor next = tokens.narrow(1, 1, len - 1).to(logits.device());  // Forward moved its own copy
    return logp.gather(2, next.unsqueeze(2)).squeeze(2);
  });
}

Result<at::Tensor> TokenLogprobs(const model::Transformer& model, const at::Tensor& tokens, const at::Tensor& mask,
                                 double temperature, const at::Tensor& routes, at::Tensor* own) {
  model::Routes replay;
  replay.replay = routes;
  replay.record = own;
  return model.MaskedTokenLogprobs(tokens, mask, temperature, replay);
}

RouteAgreement AgreementOf(const at::Tensor& replayed, const at::Tensor& own) {
  const at::Tensor r = replayed.to(at::kCPU, at::kLong), o = own.to(at::kCPU, at::kLong);
  const at::Tensor on = r.select(-1, 0).ge(0);  // [B, L, S]
  // A set of k experts either way: the order of a top k follows the probabilities, which differ.
  const at::Tensor same = std::get<0>(r.sort(-1)).eq(std::get<0>(o.sort(-1))).all(-1);
  return {(same & on).sum().item<int64_t>(), on.sum().item<int64_t>()};
}

}  // namespace rl::train
