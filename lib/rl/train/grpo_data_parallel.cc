// The data-parallel half of GrpoTrainer (grpo_trainer.h, SetGroup): before the update, the ranks'
// gradients go through one all-reduce as a single float32 bucket, and the loss totals through a
// second (float64), so that the denominator of the loss (tokens or sequences of the whole batch)
// and every statistic are those of the whole batch. Extremes (versions, the largest importance
// weight) go through an all-gather. The results are the same bits on every rank, so the ranks'
// AdamW steps, and with them their weights, stay identical.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "rl/model/torch_guard.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {

Status GrpoTrainer::SetGroup(dist::Group* group) {
  if (group && Buffered()) {
    return Status::InvalidArgument("data-parallel training takes one minibatch, one epoch and a group-relative "
                                   "estimator (grpo or rloo)");
  }
  group_ = group;
  return Status::OK();
}

Status GrpoTrainer::ReduceAcrossRanks() {
  return model::TorchGuard("grpo all-reduce", [&]() -> Status {
    // Gradients: one float32 bucket on the policy's device (a parameter this rank gave no
    // gradient adds zeros). The group reduces it where it lies: NCCL on GPUs where the build has
    // it, otherwise through host memory and Gloo.
    model::NamedTensors params;  // the trained ones (--freeze leaves some without gradients)
    for (auto& [name, p] : policy_.NamedParameters()) {
      if (p.requires_grad()) params.emplace_back(name, p);
    }
    int64_t total = 0;
    for (const auto& [name, p] : params) total += p.numel();
    at::Tensor bucket = at::zeros({total}, at::TensorOptions().dtype(at::kFloat).device(policy_.device()));
    int64_t at = 0;
    for (const auto& [name, p] : params) {
      if (p.grad().defined()) bucket.narrow(0, at, p.numel()).copy_(p.grad().reshape({-1}));
      at += p.numel();
    }
    RL_RETURN_IF_ERROR(group_->AllReduceSum(bucket));
    at = 0;
    for (auto& [name, p] : params) {
      at::Tensor g = bucket.narrow(0, at, p.numel()).view(p.sizes()).to(p.device(), p.scalar_type(), false, true);
      p.mutable_grad() = g;
      at += p.numel();
    }
    // Sums.
    double sums[] = {step_.loss,       step_.tokens,   step_.sequences, step_.clipped, step_.kl,
                     step_.value_loss, step_.value_clipped, step_.gap,  step_.gap_tokens,
                     step_.weight_sum, step_.capped,   reward_sum_,     static_cast<double>(acc_.samples),
                     static_cast<double>(acc_.groups)};
    constexpr int64_t kSums = sizeof sums / sizeof sums[0];
    at::Tensor s = at::from_blob(sums, {kSums}, at::kDouble).clone();
    RL_RETURN_IF_ERROR(group_->AllReduceSum(s));
    auto a = s.accessor<double, 1>();
    double* fields[] = {&step_.loss,       &step_.tokens,        &step_.sequences, &step_.clipped, &step_.kl,
                        &step_.value_loss, &step_.value_clipped, &step_.gap,       &step_.gap_tokens,
                        &step_.weight_sum, &step_.capped,        &reward_sum_};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) *fields[i] = a[static_cast<int64_t>(i)];
    acc_.samples = std::llround(a[kSums - 2]);
    acc_.groups = std::llround(a[kSums - 1]);
    // Extremes: a rank with no samples has none.
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const bool any = acc_.min_version <= acc_.max_version;
    double mine[] = {step_.weight_max, any ? static_cast<double>(acc_.min_version) : kInf,
                     any ? -static_cast<double>(acc_.max_version) : kInf};
    std::vector<at::Tensor> all;
    RL_RETURN_IF_ERROR(group_->AllGather(at::from_blob(mine, {3}, at::kDouble).clone(), &all));
    double weight_max = 0, lo = kInf, neg_hi = kInf;
    for (const at::Tensor& t : all) {
      auto x = t.accessor<double, 1>();
      weight_max = std::max(weight_max, x[0]);
      lo = std::min(lo, x[1]);
      neg_hi = std::min(neg_hi, x[2]);
    }
    step_.weight_max = weight_max;
    if (lo < kInf) {
      acc_.min_version = static_cast<int64_t>(lo);
      acc_.max_version = static_cast<int64_t>(-neg_hi);
    }
    return Status::OK();
  });
}

}  // namespace rl::train
