// GrpoTrainer: one GRPO update from whole groups of samples, over a batch that may arrive in
// pieces (streaming: the trainer starts on the first groups while later ones are generated).
//
//   BeginStep(); Accumulate(piece) ...; FinishStep()
// Accumulate runs forward and backward on a piece and adds its unnormalised loss gradient;
// FinishStep divides by the batch's token (or sequence) count, clips the global gradient norm,
// and takes one AdamW step. Since gradients are linear, the result is the same as one pass over
// the whole batch, whatever the pieces were (up to float summation order).
// Thread safety: none. The policy model must not be used elsewhere during Accumulate/FinishStep.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/transformer.h"
#include "rl/train/adamw.h"
#include "rl/train/grpo_loss.h"
#include "rl/train/lr_schedule.h"
#include "rl/train/sample.h"

namespace rl::train {

struct GrpoOptions {
  LrSchedule schedule;  // lr 1e-4, constant, no warm-up unless set
  double clip = 0.2;
  double kl_coef = 0;      // > 0 needs a reference model
  double grad_clip = 1.0;  // global norm; <= 0: none
  LossNorm norm = LossNorm::kToken;
  int64_t micro_batch = 128;  // sequences per forward pass
  int64_t pad_id = 0;
  AdamWOptions adamw;
};

struct StepStats {
  double loss = 0, mean_reward = 0, clip_fraction = 0, kl = 0, grad_norm = 0, lr = 0;
  int64_t samples = 0, groups = 0, tokens = 0;
  int64_t min_version = 0, max_version = 0;
};

class GrpoTrainer {
 public:
  // `reference` may be empty when options.kl_coef == 0 (InvalidArgument otherwise).
  static Result<std::unique_ptr<GrpoTrainer>> Create(model::Transformer policy,
                                                     std::optional<model::Transformer> reference,
                                                     GrpoOptions options);

  void BeginStep();
  Status Accumulate(const std::vector<Group>& groups);
  // InvalidArgument when nothing was accumulated since BeginStep.
  Result<StepStats> FinishStep();

  model::Transformer& policy() { return policy_; }
  AdamW& optimizer() { return *optimizer_; }
  const GrpoOptions& options() const { return options_; }

 private:
  GrpoTrainer(model::Transformer policy, std::optional<model::Transformer> reference, GrpoOptions options);
  Status AccumulatePiece(const std::vector<const Sample*>& samples, const std::vector<double>& adv);

  model::Transformer policy_;
  std::optional<model::Transformer> reference_;
  GrpoOptions options_;
  std::unique_ptr<AdamW> optimizer_;
  StepStats acc_;
  double loss_sum_ = 0, reward_sum_ = 0, tokens_ = 0, sequences_ = 0, clipped_ = 0, kl_ = 0;
};

}  // namespace rl::train
