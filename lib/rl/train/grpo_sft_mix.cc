// The SFT mix of GrpoTrainer (grpo_trainer.h, GrpoOptions::sft_coef): next-token NLL on examples
// of the warm start's data, added to every update's policy gradient, as InstructGPT's PPO-ptx adds
// its pretraining loss. The RL gradient the trainer has accumulated is a sum that Update divides
// by the loss's denominator; the mix's backward pass is scaled by that denominator first, so that
// after the division the update's gradient is that of
//   policy loss + sft_coef * (sum of the mixed examples' response-token NLL) / (their tokens).
#include <ATen/ATen.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "rl/model/torch_guard.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {

std::vector<const Sample*> GrpoTrainer::SftMixBatch(int64_t update) {
  const std::vector<Sample>& examples = *options_.sft_examples;
  const int64_t n = static_cast<int64_t>(examples.size());
  std::vector<const Sample*> batch;
  for (int64_t k = 0; k < options_.sft_batch; ++k) {
    const int64_t at = update * options_.sft_batch + k;
    const int64_t pass = at / n;
    if (pass != sft_pass_) {
      // Each pass its own shuffle, from the seed and the pass alone (not from the passes before),
      // so that any update's examples can be had without replaying the run.
      sft_order_.resize(static_cast<size_t>(n));
      std::iota(sft_order_.begin(), sft_order_.end(), size_t{0});
      std::mt19937_64 gen(options_.seed ^ 0x5f7d3c1a9e2b4d68ULL ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(pass + 1)));
      std::shuffle(sft_order_.begin(), sft_order_.end(), gen);
      sft_pass_ = pass;
    }
    batch.push_back(&examples[sft_order_[static_cast<size_t>(at % n)]]);
  }
  return batch;
}

Status GrpoTrainer::BackwardSftMix(double denom) {
  const std::vector<const Sample*> batch = SftMixBatch(optimizer_->steps());
  double tokens = 0;
  for (const Sample* s : batch) tokens += TrainedTokens(*s);
  if (tokens <= 0) return Status::OK();
  // This rank's share: every world-th example, scaled by the whole batch's tokens.
  const size_t rank = group_ ? static_cast<size_t>(group_->rank()) : 0;
  const size_t world = group_ ? static_cast<size_t>(group_->size()) : 1;
  std::vector<const Sample*> mine;
  for (size_t k = rank; k < batch.size(); k += world) mine.push_back(batch[k]);
  const double scale = options_.sft_coef * denom / tokens;
  return model::TorchGuard("grpo sft mix", [&]() -> Status {
    double nll_sum = 0;
    for (const std::vector<const Sample*>& piece : MicroBatches(mine)) {
      TokenBatch b = DeviceBatch(piece);
      RL_ASSIGN_OR_RETURN(at::Tensor lp, TokenLogprobs(policy_, b.tokens, b.mask));
      at::Tensor nll = -(lp * b.mask).sum();
      (nll * scale).backward();
      nll_sum += nll.item<double>();
    }
    // The step's sft_loss is the whole batch's on every rank: the shares' NLL summed (every rank
    // is here at once, CompleteGradients being SPMD), over the batch's tokens, known to all.
    if (group_) {
      at::Tensor sum = at::tensor(std::vector<double>{nll_sum}, at::kDouble);
      RL_RETURN_IF_ERROR(group_->AllReduceSum(sum));
      nll_sum = sum.item<double>();
    }
    sft_nll_ += nll_sum;
    sft_tokens_ += tokens;
    return Status::OK();
  });
}

}  // namespace rl::train
