// The data-parallel half of GrpoTrainer (grpo_trainer.h, SetGroup). Before every update the
// ranks' gradients (the policy's and, with gae, the critic's) go through one all-reduce as a
// single float32 bucket, and the loss totals through a second (float64), so that the denominator
// of the loss (tokens or sequences of the whole minibatch) and every statistic are those of the
// whole batch. Extremes (versions, the largest importance weight) go through an all-gather. The
// results are the same bits on every rank, so the ranks' AdamW steps, and with them their
// weights, stay identical. Whitening (reinforce++, gae) sums its moments over the ranks
// (advantage.h); everything else a rank needs of its samples (values, log-probabilities, GAE) is
// its own.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "rl/model/torch_guard.h"
#include "rl/train/data_parallel.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {

Status GrpoTrainer::SetGroup(dist::Group* group) {
  group_ = group;
  return Status::OK();
}

RankSumFn GrpoTrainer::RankSum() {
  if (!group_) return nullptr;
  return [this](std::vector<double>* v) -> Status {
    RL_ASSIGN_OR_RETURN(*v, SumOverRanks(*group_, std::move(*v)));
    return Status::OK();
  };
}

Status GrpoTrainer::ReduceGradients() {
  return model::TorchGuard("grpo gradient all-reduce", [&]() -> Status {
    // One float32 bucket on the policy's device (a parameter this rank gave no gradient adds
    // zeros). The group reduces it where it lies: NCCL on GPUs where the build has it, otherwise
    // through host memory and Gloo.
    model::NamedTensors params;  // the trained ones (--freeze leaves some without gradients)
    for (auto& [name, p] : policy_.NamedParameters()) {
      if (p.requires_grad()) params.emplace_back(name, p);
    }
    if (critic_) {
      for (auto& [name, p] : critic_->NamedParameters()) {
        if (p.requires_grad()) params.emplace_back("critic." + name, p);
      }
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
    return Status::OK();
  });
}

Status GrpoTrainer::ReduceTotals(Totals* t, bool counts) {
  return model::TorchGuard("grpo totals all-reduce", [&]() -> Status {
    double* fields[] = {&t->loss,       &t->tokens,        &t->sequences, &t->clipped,    &t->kl,
                        &t->value_loss, &t->value_clipped, &t->gap,       &t->gap_tokens, &t->weight_sum,
                        &t->capped,     &t->routes_agreed, &t->routes_replayed, &reward_sum_};
    constexpr int64_t kFields = sizeof fields / sizeof fields[0];
    std::vector<double> sums;
    for (double* f : fields) sums.push_back(*f);
    sums.push_back(static_cast<double>(acc_.samples));
    sums.push_back(static_cast<double>(acc_.groups));
    at::Tensor s = at::tensor(sums, at::kDouble);
    RL_RETURN_IF_ERROR(group_->AllReduceSum(s));
    auto a = s.accessor<double, 1>();
    // reward_sum_ and the counts are the step's: summed once a step (counts), else left alone.
    for (int64_t i = 0; i < kFields - 1; ++i) *fields[i] = a[i];
    if (counts) {
      reward_sum_ = a[kFields - 1];
      acc_.samples = std::llround(a[kFields]);
      acc_.groups = std::llround(a[kFields + 1]);
    }
    // Extremes: a rank with no samples has none.
    constexpr double kInf = std::numeric_limits<double>::infinity();
    const bool any = acc_.min_version <= acc_.max_version;
    double mine[] = {t->weight_max, any ? static_cast<double>(acc_.min_version) : kInf,
                     any ? -static_cast<double>(acc_.max_version) : kInf};
    std::vector<at::Tensor> all;
    RL_RETURN_IF_ERROR(group_->AllGather(at::from_blob(mine, {3}, at::kDouble).clone(), &all));
    double weight_max = 0, lo = kInf, neg_hi = kInf;
    for (const at::Tensor& x : all) {
      auto v = x.accessor<double, 1>();
      weight_max = std::max(weight_max, v[0]);
      lo = std::min(lo, v[1]);
      neg_hi = std::min(neg_hi, v[2]);
    }
    t->weight_max = weight_max;
    if (counts && lo < kInf) {
      acc_.min_version = static_cast<int64_t>(lo);
      acc_.max_version = static_cast<int64_t>(-neg_hi);
    }
    return Status::OK();
  });
}

}  // namespace rl::train
