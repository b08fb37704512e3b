// GrpoTrainer: the policy-gradient updates of one training step (GRPO, RLOO, REINFORCE++ or PPO
// with a critic: advantage.h) from whole groups of samples, over a batch that may arrive in
// pieces (streaming: the trainer starts on the first groups while later ones are generated).
//
//   BeginStep(); Accumulate(piece) ...; FinishStep()
// With one minibatch and one epoch (the default), Accumulate runs forward and backward on a piece
// and adds its unnormalised loss gradient; FinishStep divides by the batch's denominator (see
// grpo_loss.h), clips the global gradient norm, and takes one AdamW step. Since gradients are
// linear, the result is the same as one pass over the whole batch, whatever the pieces were (up
// to float summation order).
// With M minibatches or E epochs, Accumulate only keeps the groups (advantages are computed per
// whole group); FinishStep then passes over the batch E times, each time in a fresh random order
// (seeded by options.seed and the optimizer's step count, so a resumed run repeats it) split into
// M minibatches of nearly equal size, and takes one AdamW step per minibatch. Every ratio is
// against the log-probabilities the samples were generated with, so from the second update on
// the ratio moves away from 1 and the clip acts, as in PPO.
// Estimators that need the whole batch (reinforce++, reinforce++-baseline, gae) always keep the
// groups until FinishStep, as with several minibatches.
// PPO with a critic (advantage gae): FinishStep first computes every held sample's values with the
// critic as it is (V_old), then GAE advantages and returns, whitens the advantages over the batch,
// and on every minibatch takes one AdamW step of the policy and one of the critic (its own AdamW,
// learning rate critic_lr, the clipped value loss of grpo_loss.h, the same gradient clip).
// Data-parallel (SetGroup): each rank accumulates its own groups (whole groups: a group's
// advantages need all of it); before each update the ranks sum their gradients and loss totals
// (tokens, sequences, rewards), so the denominator is the whole batch's (or minibatch's) and every
// rank takes the same update. Streaming, that is the step one trainer takes on the whole batch
// (to float summation order). With M minibatches, each rank splits its own samples into M, and
// minibatch m is the union of the ranks' m-th parts: the batch is still split into M of nearly
// equal size, in another random order than one trainer's. Whitening (reinforce++, gae) is over
// the whole batch (its moments summed over the ranks); the critic's gradients are summed as the
// policy's. One minibatch of E epochs is E of one trainer's updates on the whole batch.
// Thread safety: none. The policy model must not be used elsewhere during Accumulate/FinishStep.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "rl/core/status.h"
#include "rl/dist/group.h"
#include "rl/model/transformer.h"
#include "rl/train/adamw.h"
#include "rl/train/advantage.h"
#include "rl/train/grpo_loss.h"
#include "rl/train/lr_schedule.h"
#include "rl/train/sample.h"
#include "rl/train/value_model.h"

namespace rl::train {

struct GrpoOptions {
  LrSchedule schedule;  // lr 1e-4, constant, no warm-up unless set
  double clip = 0.2;
  double kl_coef = 0;      // > 0 needs a reference model, or ref_from_rows
  KlEstimator kl_estimator = KlEstimator::kK3;  // of the KL term (grpo_loss.h)
  // With kl_coef > 0 and no reference model: the reference log-probabilities are the samples'
  // ref_logprobs (rows scored by `rl-train score`, ref_loop.h); a sample without them is a DataError.
  bool ref_from_rows = false;
  double grad_clip = 1.0;  // global norm; <= 0: none
  LossNorm norm = LossNorm::kToken;
  double norm_constant = 0;   // C of seq-mean-token-sum-norm (> 0 there)
  int64_t minibatches = 1;    // optimizer steps per epoch over the batch
  int64_t epochs = 1;         // passes over the batch
  double temperature = 1.0;   // of the log-probabilities: the rollout's sampling temperature
  OffPolicy off;              // correction of the behaviour/proximal mismatch (grpo_loss.h)
  Advantage advantage = Advantage::kGrpo;
  double gamma = 1.0, lambda = 1.0;  // of GAE
  double value_clip = 0.2;           // c of the clipped value loss; <= 0: no clip
  double critic_lr = 0;              // the critic's peak learning rate (same schedule); 0: the policy's
  uint64_t seed = 0;          // of the minibatch order (and of the SFT mix's)
  // An SFT loss mixed into every update (PPO-ptx, InstructGPT's guard against forgetting what the
  // warm start learnt): sft_coef x the token-mean next-token NLL (temperature 1) of the responses
  // of sft_batch of these examples (EncodeSftData, sft.h), added to the policy's loss before the
  // gradient clip. The examples of update u (the optimizer's step count) are positions
  // [u * sft_batch, (u + 1) * sft_batch) of an endless sequence of seeded shuffles of them, one per
  // pass, so a resumed run (its optimizer step count comes back) takes the ones it would have.
  // Data-parallel ranks take every world-th example of each update's batch and scale by the whole
  // batch's tokens, so that the sum over the ranks is one trainer's. 0: off.
  double sft_coef = 0;
  int64_t sft_batch = 16;
  std::shared_ptr<const std::vector<Sample>> sft_examples;  // needed when sft_coef > 0
  // Set: every step writes the tensors its loss came from here, for an independent check
  // (tests/reference/grpo_loss_reference.py): step-S-batch.safetensors (rewards, group and length
  // of every sample; token_adv, turn_rewards and turn_ends (1 where a turn ends) [N, T] and, with gae,
  // values and returns [N, T]; the estimator's
  // options as metadata) and step-S-update-U-piece-P.safetensors (new_lp, old_lp, mask, adv
  // [B, T], ref_lp, prox_lp; with gae values, old_values, returns; the loss sums and options as
  // metadata), S counting from 0 per trainer step.
  std::string dump_dir;
  int64_t micro_batch = 128;  // sequences per forward pass
  int64_t pad_id = 0;
  AdamWOptions adamw;
  // Parameters whose names (Hugging Face names, transformer_module.h) begin with one of these are
  // not trained: no gradient is computed for them and the optimizer leaves them as they are. With
  // "model.embed_tokens" (tied to the LM head when tie_word_embeddings) a model with a large
  // vocabulary skips the [V, D] weight gradient, a third of its LM head's training compute (hf-grpo's
  // trainer: 450 -> ~590 tokens/s). Each prefix must
  // name at least one parameter (InvalidArgument otherwise).
  std::vector<std::string> freeze;
  // Where the policy, the reference model and the critic compute (device.h). The batches are made
  // on the host and moved there; loss sums come back.
  c10::Device device = c10::Device(c10::kCPU);
  // The policy (and reference) compute in bfloat16, with float32 masters and moments in AdamW
  // (adamw.h); the masters start from the policy's float32 weights when it comes in float32.
  bool bf16 = false;
  // Routing replay (R3, model::Routes): the policy's log-probabilities use the experts the rollout
  // recorded (Sample::routes) wherever a sample has them; tokens without route freely. For a
  // mixture of experts; a dense policy has nothing to replay.
  bool routing_replay = false;
};

struct StepStats {
  // loss and grad_norm: means over the step's updates; clip_fraction and kl: over every token of
  // every update; tokens: the batch's response tokens. logprob_gap: the mean over the batch's
  // tokens of |new_lp - old_lp| before the step's first update, i.e. how far the trainer's
  // log-probabilities are from those the rollout recorded; rows of the current version (sync
  // mode) give float rounding (1e-7 in grpo_loop_test) unless the temperatures or weights differ.
  double loss = 0, mean_reward = 0, clip_fraction = 0, kl = 0, grad_norm = 0, lr = 0, logprob_gap = 0;
  // With routing replay: of the (token, sparse layer) entries replayed before the step's first
  // update, the share whose experts the trainer's router picked itself (1: training and rollout
  // route alike; below, the mismatch replay removes), and their count (0: nothing replayed).
  double route_agreement = 0;
  int64_t routes_replayed = 0;
  // With a correction: its importance weights over every token of every update (mean, largest)
  // and the share the cap cut.
  double is_weight_mean = 0, is_weight_max = 0, is_capped_fraction = 0;
  // With a critic: the value loss (mean over updates of the token mean) and the share of tokens
  // whose value the clip held back.
  double value_loss = 0, value_clip_fraction = 0;
  // With an SFT mix: the token-mean NLL of the examples mixed into the step's updates (with ranks,
  // of all of them, the same on every rank).
  double sft_loss = 0;
  int64_t samples = 0, groups = 0, tokens = 0, updates = 0;
  // Of `updates`, those skipped because their gradient was not finite (NaN or inf): the weights
  // did not change for them. A rate far too high, or values in the rows that overflow.
  int64_t skipped_updates = 0;
  int64_t min_version = 0, max_version = 0;
};

// InvalidArgument for a non-positive micro batch, minibatch or epoch count or temperature, and for
// seq-mean-token-sum-norm without its constant. rl-train checks this before it reads anything.
Status ValidateGrpoOptions(const GrpoOptions& options);

class GrpoTrainer {
 public:
  // `reference` may be empty when options.kl_coef == 0 or options.ref_from_rows, and must be then
  // (InvalidArgument otherwise, and for what ValidateGrpoOptions refuses). With advantage gae, `critic` (empty: ValueModel::FromPolicy of
  // the policy) is trained alongside; other estimators ignore it.
  static Result<std::unique_ptr<GrpoTrainer>> Create(model::Transformer policy,
                                                     std::optional<model::Transformer> reference,
                                                     GrpoOptions options,
                                                     std::optional<ValueModel> critic = std::nullopt);

  // Makes this trainer one rank of `group` (*group must outlive the trainer; nullptr: alone).
  // Every rank must then call FinishStep once per step, also with nothing accumulated, and the
  // ranks must share their options (rl-train compares the flags) and start from the same weights.
  Status SetGroup(dist::Group* group);

  void BeginStep();
  Status Accumulate(const std::vector<Group>& groups);
  // InvalidArgument when nothing was accumulated since BeginStep.
  Result<StepStats> FinishStep();

  model::Transformer& policy() { return policy_; }
  AdamW& optimizer() { return *optimizer_; }
  // The critic and its optimizer (advantage gae); null otherwise.
  ValueModel* critic() { return critic_ ? &*critic_ : nullptr; }
  AdamW* critic_optimizer() { return critic_optimizer_.get(); }
  const GrpoOptions& options() const { return options_; }

 private:
  GrpoTrainer(model::Transformer policy, std::optional<model::Transformer> reference, GrpoOptions options,
              std::optional<ValueModel> critic, const model::NamedTensors& masters_from);
  // A batch made on the host, on options_.device.
  TokenBatch DeviceBatch(const std::vector<const Sample*>& samples) const;
  // The routes the critic replays: the batch's, where its experts are the policy's; else none.
  at::Tensor CriticRoutes(const TokenBatch& batch) const;
  // What the loss of some samples added up to (its gradient is in the parameters' .grad).
  struct Totals {
    double loss = 0, tokens = 0, sequences = 0, clipped = 0, kl = 0;
    double value_loss = 0, value_clipped = 0;  // with a critic
    double gap = 0, gap_tokens = 0;  // sum of |new_lp - old_lp| before the step's first update
    double weight_sum = 0, weight_max = 0, capped = 0;
    double routes_agreed = 0, routes_replayed = 0;  // routing replay, before the step's first update
    void Add(const Totals& t);
  };
  // Per-token values of a sample (one per response token), by sample.
  using TokenValues = std::unordered_map<const Sample*, std::vector<float>>;
  bool Buffered() const { return options_.minibatches * options_.epochs > 1 || !PerGroup(options_.advantage); }
  // Forward and backward over `samples` (advantages in adv_) in micro-batches, shortest first.
  Result<Totals> Backward(const std::vector<const Sample*>& samples);
  // `samples` cut into micro-batches after a stable sort by length (prompt and response): a
  // micro-batch is padded to its longest, so one runaway response (no <eos> until the context is
  // full) would otherwise make its whole micro-batch that long.
  std::vector<std::vector<const Sample*>> MicroBatches(const std::vector<const Sample*>& samples) const;
  Result<Totals> BackwardPiece(const std::vector<const Sample*>& samples);
  // The critic's half of a piece: its value loss backward; adds to *t.
  Status BackwardCritic(const std::vector<const Sample*>& samples, const TokenBatch& batch, Totals* t,
                        model::NamedTensors* dump);
  // The gradients of an update made whole before Update: t summed over the ranks, the SFT mix's
  // gradient added (scaled by t's denominator, which Update divides by), the ranks' gradients
  // summed. With `counts`, the step's counts are summed too (ReduceTotals), and a step without
  // samples on any rank is InvalidArgument on every rank.
  Status CompleteGradients(Totals* t, bool counts);
  // The SFT mix (grpo_sft_mix.cc): the examples of update `update`, and the backward pass of this
  // rank's share of them, scaled by `denom`.
  std::vector<const Sample*> SftMixBatch(int64_t update);
  Status BackwardSftMix(double denom);
  // Normalise the accumulated gradients by t's denominators, clip them and step; returns the
  // policy's gradient norm.
  Result<double> Update(const Totals& t, double lr);
  Result<StepStats> FinishBuffered(StepStats out, double lr);
  // Data-parallel (grpo_data_parallel.cc). The ranks' gradients of the policy and the critic,
  // summed in place.
  Status ReduceGradients();
  // *t summed over the ranks (weight_max: the largest); with `counts`, also the step's reward sum,
  // samples, groups and version range in acc_.
  Status ReduceTotals(Totals* t, bool counts);
  // Whitening's sum over the ranks (empty alone).
  RankSumFn RankSum();
  // The held batch's advantages (and, with gae, old values and returns) in adv_, values_, returns_.
  Status HeldAdvantages();
  // Turn rewards (advantage.h): grpo's process term added to adv_ of g's samples; other
  // estimators but gae (which takes them as token rewards) warn once that they ignore them.
  void AddTurnRewards(const Group& g);
  // Dumps (grpo_dump.cc). Copies what DumpBatch writes of these samples (group number `group`).
  void KeepForDump(const Sample& s, int64_t group);
  Status DumpPiece(model::NamedTensors tensors, const LossSums& sums, const Totals& critic);
  void SetWeights(const Totals& t, StepStats* out);
  static void SetAgreement(const Totals& t, StepStats* out);
  // Each sample's log-probabilities (policy) or values (critic) now, without gradient, into *out.
  Status RecordPerToken(const std::vector<const Sample*>& samples, bool critic, TokenValues* out);
  // A [B, L-1] matrix of samples' per-token values, at the positions of their response tokens.
  static at::Tensor PerToken(const std::vector<const Sample*>& samples, const at::Tensor& mask,
                             const TokenValues& values);
  // The reference log-probabilities of a piece: the reference model's, or (ref_from_rows) the
  // samples' ref_logprobs where mask is nonzero; undefined without a KL term.
  Result<at::Tensor> ReferenceLogprobs(const std::vector<const Sample*>& samples, const TokenBatch& batch) const;
  Status DumpBatch();

  model::Transformer policy_;
  std::optional<model::Transformer> reference_;
  GrpoOptions options_;
  std::unique_ptr<AdamW> optimizer_;
  StepStats acc_;
  Totals step_;             // streaming: the whole batch so far
  double reward_sum_ = 0;
  std::optional<ValueModel> critic_;
  std::unique_ptr<AdamW> critic_optimizer_;
  std::vector<Group> held_;  // buffered: the batch's groups
  bool warned_turn_rewards_ = false;  // an estimator that ignores turn rewards says so once
  TokenValues adv_;      // every sample's advantage per token (streaming: the piece's only)
  TokenValues values_;   // with a critic: its values before the step's first update (V_old)
  TokenValues returns_;  // with a critic: the GAE returns
  // Decoupled correction over minibatches: each held sample's log-probabilities under the weights
  // the step started from (the proximal policy), taken before the first update.
  TokenValues prox_;
  int64_t update_ = 0;  // updates taken in this step so far
  int64_t skipped_ = 0;  // of them, skipped for a gradient that was not finite
  // The SFT mix: the shuffle of the examples for pass sft_pass_, and the step's NLL and tokens.
  std::vector<size_t> sft_order_;
  int64_t sft_pass_ = -1;
  double sft_nll_ = 0, sft_tokens_ = 0;
  // Dumping: the batch's rewards and group numbers, its per-token advantages (and values and
  // returns), in order, and the next piece's number.
  std::vector<float> dump_rewards_, dump_groups_;
  std::vector<std::vector<float>> dump_adv_, dump_values_, dump_returns_;
  // Per token: the turn rewards at their turns' last tokens, and 1 where a turn ends.
  std::vector<std::vector<float>> dump_turn_rewards_, dump_turn_ends_;
  int64_t dump_piece_ = 0;
  dist::Group* group_ = nullptr;  // data-parallel ranks; null alone
};

}  // namespace rl::train
