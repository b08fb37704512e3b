// AdaptiveGenerate: one generation stage over a group of N processes laid out as N/t
// data-parallel replicas of tensor-parallel degree t (replica k on ranks [k*t, (k+1)*t), each
// decoding its share of the prompts with its own continuous batch), whose degree widens during
// the stage when PAT's rule says so: many narrow replicas are fastest while the batch is full,
// wide ones for the long tail of a few long responses. The degrees are those t dividing N over
// which the model splits; a stage may widen several times (1 -> 2 -> 4 as the tail shrinks).
//
// The rule: every check_every rounds the ranks exchange their loads (pending prompts, and each
// unfinished sequence's length and remaining token budget) over the whole group. Once no prompt
// is pending, the predictor (latency_model.h) compares the time to finish at the current degree
// with, for each wider degree it was profiled at, the time after merging the unfinished sequences
// into the wider replicas (balanced by remaining work, MergeInto) plus the switch's cost; the
// switch goes to the best of them, and only when that wins by `margin`. Every rank computes the
// decision from the same exchanged loads, and rank 0's is broadcast as the group's.
// A switch restarts nothing: the weights are resharded from the whole model each rank holds (a
// slice, no reload); the sequences keep their state, either by moving the KV cache (one
// all-gather per layer of the valid entries over the group, each rank keeping the key/value heads
// its new shard holds) or by recomputing it (a prefill), whichever the predictor says is cheaper;
// the communication groups of every degree are made once, before the first round, and kept in
// the group for later stages. With greedy decoding the tokens are those of a run that never
// switches.
// Refill (AdaptiveOptions::refill): the stage takes new prompts while it runs, as model::Generate
// does with more_prompts. At every check (every check_every rounds, whatever the degree, static
// replicas and one replica over every rank included) the responses finished since the last check
// are shared, rank 0 tells its on_finished of each, and when nothing is pending and slots are
// free rank 0 asks its more_prompts for more and broadcasts them. New prompts go to the replicas
// with the fewest sequences. Arriving while the stage is wider than start_tp, they narrow it back
// first (the state moves as when widening, split instead of merged): PAT's rule, many narrow
// replicas while there is work for them, wide ones for the tail alone. With a predictor, the
// narrowing is predicted too: to each narrower degree it knows against staying wide, both with the
// new prompts' prefill and budgets added, the move included; the best narrower one is taken unless
// staying wins by `margin` (where wide replicas are faster even for full batches, the stage stays
// wide and the prompts go to its replicas). Without one, it narrows to start_tp.
// The stage's loop is here; the rule's decisions are adaptive_rule.h, the move of sequences at a
// switch adaptive_merge.h.
// Thread safety: every rank calls this at once with the same prompts and options (SPMD).
#pragma once

#include <cstdint>
#include <vector>

#include "rl/core/status.h"
#include "rl/dist/group.h"
#include "rl/dist/latency_model.h"
#include "rl/model/generate.h"
#include "rl/model/transformer.h"

namespace rl::dist {

struct AdaptiveOptions {
  model::GenerateOptions generate;  // slots: per data-parallel replica
  bool adaptive = true;             // false: stay at start_tp throughout
  int start_tp = 1;                 // a degree dividing the group's size (N: one replica over all)
  int check_every = 8;              // rounds between the coordinator's checks
  double margin = 0.05;             // switch only if it is predicted this fraction faster
  const LatencyModel* predictor = nullptr;  // required when adaptive and force_switch_check < 0
  // With a predictor: every pure decode round is predicted from the profile times calibration's
  // scale (RoundTrace::predicted) before the round is observed into it, and the decisions use the
  // profile so scaled. Null: the profile as measured. It may live across stages.
  LatencyCalibration* calibration = nullptr;
  enum class Move { kAuto, kMigrate, kRecompute } move = Move::kAuto;
  // Tests: from this check (0-based) on, widen to the next degree at every check, whatever the
  // predictor (1 -> 2 -> 4 with N = 4). Narrowing for refilled prompts still asks the predictor
  // when there is one.
  int force_switch_check = -1;
  // Static replicas meet only when done (with refill, at every check): how long the first there
  // may wait for the others.
  int64_t idle_timeout_ms = 24LL * 3600 * 1000;
  // Every rank: the stage takes new prompts (see the file comment); generate.more_prompts and
  // generate.on_finished are rank 0's (the other ranks' are not called). Not with
  // generate.max_new_tokens_each.
  bool refill = false;
};

struct SwitchRecord {
  int64_t round = 0;       // the round after which it happened
  double began_ts = 0;     // when it began: Unix seconds on this rank's clock (rl-profile's timeline)
  int from = 1, to = 1;    // tensor-parallel degrees
  int64_t sequences = 0;   // moved
  bool recompute = false;  // the state was recomputed, not moved
  double state_s = 0;      // moving or recomputing the KV cache
  double reshard_s = 0;    // slicing the weights
  double other_s = 0;      // exchanging sequence metadata, setting up the replica
  SwitchEstimate predicted;
  double total_s() const { return state_s + reshard_s + other_s; }
};

// New prompts at a stage wider than start_tp that DecideNarrow took into the wide replicas: the
// split it weighed and did not make. Every rank records the stay (rank 0 decided it); `to` and
// `predicted` are this rank's own estimate, so rank 0's are the ones that decided.
struct StayRecord {
  int64_t round = 0;       // the round after which the prompts came
  double ts = 0;           // when: Unix seconds on this rank's clock (rl-profile's timeline)
  int tp = 1;              // the degree it stayed at
  int to = 1;              // the best narrower degree it weighed
  int64_t sequences = 0;   // held when the prompts came
  int64_t added = 0;       // the new prompts
  SwitchEstimate predicted;  // that split's: total_s() against stay_s
};

// One round of this rank's replica, for checking the predictor against real trajectories.
struct RoundTrace {
  int tp = 1;
  int64_t batch = 0;
  int64_t context_tokens = 0;
  bool prefill = false;  // prompts were started in the round: not a pure decode step
  double seconds = 0;
  // With a predictor, for a pure decode round: its predicted time, from what was known before it
  // (the calibration's scale before this round); 0 otherwise.
  double predicted = 0;
};

struct AdaptiveResult {
  // One per prompt (with refill, the caller's and then those more_prompts added), the same on
  // every rank.
  std::vector<model::Generation> generations;
  int64_t refills = 0;     // checks at which more_prompts gave prompts
  // Of those, the ones at a stage wider than start_tp that the predictor said to take wide.
  std::vector<StayRecord> stays;
  // Rank 0's more_prompts or on_finished failed: it returns that error, the other ranks this flag
  // (with what they had), so that none waits for the rest of a stage that will not come.
  bool abandoned = false;
  std::vector<SwitchRecord> switches;
  std::vector<RoundTrace> trace;
  double seconds = 0;  // the stage, on this rank (the last collective ends it on every rank)
};

// The degrees a group of `ranks` can take with this model, ascending: those dividing ranks over
// which the model splits (1 always).
std::vector<int> TensorParallelDegrees(const model::ModelConfig& config, int ranks);

// InvalidArgument for bad options (a start_tp that does not divide the group's size, no
// predictor, a predictor without start_tp, refill with per-prompt budgets), Config when the model does not split at start_tp,
// Unavailable when a rank is lost (the stage is then abandoned: its prompts' leases come back to
// the queue).
Result<AdaptiveResult> AdaptiveGenerate(Group& group, const model::Transformer& whole,
                                        const std::vector<std::vector<int64_t>>& prompts,
                                        const AdaptiveOptions& options);

}  // namespace rl::dist
