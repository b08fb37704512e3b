#include "rl/train/grpo_trainer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "rl/model/torch_guard.h"

namespace rl::train {

Result<std::unique_ptr<GrpoTrainer>> GrpoTrainer::Create(model::Transformer policy,
                                                         std::optional<model::Transformer> reference,
                                                         GrpoOptions options) {
  if (options.kl_coef > 0 && !reference) return Status::InvalidArgument("a KL term needs a reference model");
  if (options.micro_batch < 1) return Status::InvalidArgument("micro batch must be positive");
  return std::unique_ptr<GrpoTrainer>(new GrpoTrainer(std::move(policy), std::move(reference), options));
}

GrpoTrainer::GrpoTrainer(model::Transformer policy, std::optional<model::Transformer> reference,
                         GrpoOptions options)
    : policy_(std::move(policy)), reference_(std::move(reference)), options_(options) {
  optimizer_ = std::make_unique<AdamW>(policy_.NamedParameters(), options_.adamw);
  BeginStep();
}

void GrpoTrainer::BeginStep() {
  optimizer_->ZeroGrad();
  acc_ = StepStats();
  acc_.min_version = INT64_MAX;
  acc_.max_version = INT64_MIN;
  loss_sum_ = reward_sum_ = tokens_ = sequences_ = clipped_ = kl_ = 0;
}

Status GrpoTrainer::Accumulate(const std::vector<Group>& groups) {
  std::vector<const Sample*> samples;
  std::vector<double> adv;
  for (const Group& g : groups) {
    std::vector<double> rewards;
    for (const Sample& s : g.samples) rewards.push_back(s.reward);
    std::vector<double> a = GroupAdvantages(rewards);
    for (size_t i = 0; i < g.samples.size(); ++i) {
      const Sample& s = g.samples[i];
      samples.push_back(&s);
      adv.push_back(a[i]);
      reward_sum_ += s.reward;
      acc_.min_version = std::min(acc_.min_version, s.version);
      acc_.max_version = std::max(acc_.max_version, s.version);
    }
    acc_.groups++;
  }
  acc_.samples += static_cast<int64_t>(samples.size());
  // A micro-batch is padded to its longest sequence, so one runaway response (no <eos> until the
  // context is full) would make its whole micro-batch that long: take the samples by length.
  std::vector<size_t> order(samples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto length = [&](size_t i) { return samples[i]->prompt_ids.size() + samples[i]->response_ids.size(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return length(a) < length(b); });
  for (size_t at = 0; at < order.size(); at += options_.micro_batch) {
    size_t end = std::min(order.size(), at + static_cast<size_t>(options_.micro_batch));
    std::vector<const Sample*> piece;
    std::vector<double> piece_adv;
    for (size_t k = at; k < end; ++k) {
      piece.push_back(samples[order[k]]);
      piece_adv.push_back(adv[order[k]]);
    }
    RL_RETURN_IF_ERROR(AccumulatePiece(piece, piece_adv));
  }
  return Status::OK();
}

Status GrpoTrainer::AccumulatePiece(const std::vector<const Sample*>& samples, const std::vector<double>& adv) {
  return model::TorchGuard("grpo accumulate", [&]() -> Status {
    TokenBatch batch = MakeTokenBatch(samples, options_.pad_id);
    at::Tensor ref_lp;
    if (reference_ && options_.kl_coef > 0) {
      c10::NoGradGuard no_grad;
      RL_ASSIGN_OR_RETURN(ref_lp, TokenLogprobs(*reference_, batch.tokens, batch.mask));
    }
    RL_ASSIGN_OR_RETURN(at::Tensor new_lp, TokenLogprobs(policy_, batch.tokens, batch.mask));
    at::Tensor a = at::tensor(std::vector<float>(adv.begin(), adv.end()), at::kFloat);
    RL_ASSIGN_OR_RETURN(LossSums sums, PolicyLossSums(new_lp, batch.old_lp, batch.mask, a, options_.clip,
                                                      options_.norm, ref_lp, options_.kl_coef));
    sums.sum.backward();
    loss_sum_ += sums.sum.item<double>();
    tokens_ += sums.tokens;
    sequences_ += sums.sequences;
    clipped_ += sums.clipped;
    kl_ += sums.kl;
    return Status::OK();
  });
}

Result<StepStats> GrpoTrainer::FinishStep() {
  if (acc_.samples == 0) return Status::InvalidArgument("no samples in this step");
  double denom = options_.norm == LossNorm::kToken ? tokens_ : sequences_;
  if (denom <= 0) return Status::DataError("no response tokens in this step");
  optimizer_->ScaleGrad(1.0 / denom);
  StepStats out = acc_;
  out.grad_norm = optimizer_->ClipGradNorm(options_.grad_clip);
  // Adam's first steps move every weight by about lr whatever its gradient (m/sqrt(v) is the sign
  // of g at t = 1): on a freshly fine-tuned policy that random-looking jolt is what a warm-up avoids.
  // The optimizer's step count comes back with a checkpoint, so a resumed run keeps its schedule.
  out.lr = LearningRate(options_.schedule, optimizer_->steps());
  RL_RETURN_IF_ERROR(optimizer_->Step(out.lr));
  out.loss = loss_sum_ / denom;
  out.mean_reward = reward_sum_ / static_cast<double>(out.samples);
  out.tokens = static_cast<int64_t>(tokens_);
  out.clip_fraction = tokens_ > 0 ? clipped_ / tokens_ : 0;
  out.kl = tokens_ > 0 ? kl_ / tokens_ : 0;
  BeginStep();
  return out;
}

}  // namespace rl::train
