// A discrete-event simulation of the GRPO pipeline for rl-profile plan (man/rl-profile.1, PLAN):
// the trainer's feeder, N rollout slots, M reward slots, the trainer (ranks), weight sync and the
// staleness bound k with start fraction f, on a simulated clock driven by an event heap.
//
// What it models, after lib/rl/train/grpo_loop.h:
//   feeder    keeps (1 + k) * prompts_per_step groups in flight (fed and not yet acked after the
//             trainer's checkpoint), each stamped min_version = version - k; it runs when a step
//             starts, when the trainer takes groups and every 0.2 s while the trainer waits.
//   rollout   takes up to rollout_rows rows (whole groups) when idle, switches to the newest
//             version that has reached it, waits for the rows' min_version, then generates them
//             in one continuous batch: draws each response length from the length quartiles,
//             and costs the decode rounds (cost per round from a decode profile, or the fitted
//             linear cost) plus a per-row prefill.
//   reward    takes up to reward_rows rows when idle; batch_s + row_s per row.
//   trainer   takes ready groups, dropping a share 1 - keep of them (dynamic sampling: equal
//             rewards), which the feeder replaces; a group older than version - k goes back to be regenerated;
//             trains pieces of >= micro_batch rows once start_fraction of the batch arrived,
//             split over `ranks` parallel jobs; then the optimizer step, the per-step serial work
//             (evaluation, snapshot), publishing version v+1 (it reaches rollouts sync_s later)
//             and a background checkpoint write whose end acks the batch. With k = 0 the next
//             step waits for that write.
//   handoffs  every hand-over through the queue (fed, generated, scored) takes hop_s.
//   cores     every computing job (a rollout batch, a reward batch, a trainer piece or rank,
//             the serial work, the checkpoint write) takes one core; with n jobs on more than
//             `cores` each runs at cores / n (processor sharing). Costs are those of a job alone,
//             so a fractional `cores` (at least 1) stands for a measured parallel speed-up.
// Deterministic for a seed. Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::profile {

// Decode-round time as a function of active sequences and context tokens: the tp = 1 points of a
// decode-grid profile (rl-profile adaptive's latency model file), interpolated linearly.
struct DecodeTable {
  // batch -> (context tokens, seconds) sorted by context.
  std::vector<std::pair<int64_t, std::vector<std::pair<double, double>>>> by_batch;
  double prefill_token_s = 0;  // seconds per prompt token of a prefill
  bool empty() const { return by_batch.empty(); }
  double Round(int64_t active, int64_t context_tokens) const;
};

struct PlanCosts {
  // A rollout batch: round_s * rounds + token_s * tokens + row_s * rows (tokens: response tokens,
  // the sum of active sequences over the rounds), or with a decode table its rounds plus
  // row_s * rows.
  double gen_round_s = 0, gen_token_s = 0, gen_row_s = 0;
  DecodeTable decode;
  std::vector<double> lengths = {1, 1, 1, 1, 1};  // response length min, quartiles, max
  double prompt_tokens = 0;                       // mean prompt length
  double reward_batch_s = 0, reward_row_s = 0;
  double train_step_s = 0;       // per step: optimizer step and fixed costs
  double train_token_s = 0;      // per trained token, on one rank
  double train_tokens_per_row = 0;
  double allreduce_s = 0;        // per step with ranks > 1
  double post_s = 0;             // serial trainer work per step: evaluation (amortized), snapshot
  double write_s = 0;            // the background checkpoint write
  double sync_s = 0;             // publish to a version's arrival at the rollouts
  double hop_s = 0;              // one hand-over through the queue
};

struct PlanShape {
  int64_t prompts_per_step = 64, group_size = 8;
  int64_t rollout_rows = 256, reward_rows = 256, micro_batch = 128;
  double keep = 1;  // share of groups dynamic sampling keeps (the others have equal rewards)
};

struct PlanConfig {
  std::string mode = "sync";  // a name for tables
  int rollouts = 1, rewards = 1, ranks = 1;
  int64_t staleness = 0;      // k
  double start_fraction = 1;  // f
};

struct SimResult {
  double step_s = 0;          // mean seconds per step after the warm-up steps
  double samples_per_s = 0;
  double trainer_idle = 0;    // share of that time the trainer computed nothing
  double rollout_busy = 0;    // mean share of that time a rollout slot generated
  int64_t regenerated = 0;    // groups sent back for being older than version - k
  std::vector<double> step_ends;  // simulated time of each step's end
};

// DataError on a configuration that cannot run (no rollout or reward slot, f outside [0, 1],
// warmup >= steps); Internal when the simulation stops making progress.
Result<SimResult> Simulate(const PlanCosts& costs, const PlanShape& shape, const PlanConfig& config,
                           int64_t steps, int64_t warmup, double cores, uint64_t seed);

}  // namespace rl::profile
