// The inputs of rl-profile plan: per-role costs fitted to a run's event logs, a decode profile,
// and what a run measured (its configuration and seconds per step), for checks against the
// simulator (plan_sim.h). The events read are listed in man/rl-profile.1, PLAN.
//
//   rollout   each batch event: seconds = round_s * rounds + token_s * tokens + row_s * rows,
//             least squares with non-negative coefficients; length quartiles and prompt tokens
//             averaged over the batches.
//   reward    each batch event: seconds = batch_s + row_s * rows (non-negative least squares).
//   trainer   each step event: train_seconds = token_s * tokens + step_s; post_s = the mean of
//             eval_seconds plus that of the snapshot events; write_s = the median time from a
//             version's snapshot event to its checkpoint event; keep = samples over samples plus
//             uniform_rows.
//   sync      the median time from a version's snapshot event to its arrival at a rollout
//             (weights-arrived, or weights when pulled from files).
// Thread safety: plain values and reentrant functions.
#pragma once

#include <string>

#include "rl/core/status.h"
#include "rl/profile/plan_sim.h"
#include "rl/profile/report_events.h"

namespace rl::profile {

struct RunMeasure {
  PlanConfig config;     // mode from the trainer's start event, slots from the lanes that worked
  PlanShape shape;      // prompts per step, group size and micro-batch from that start event
  int64_t steps = 0;     // step events
  double step_s = 0;     // mean seconds between step events after `warmup` steps
};

struct PlanFit {
  PlanCosts costs;
  RunMeasure run;
};

// The mode name of (k, f): sync, semi-sync, async, async-kN, or k=N,f=X.
std::string ModeName(int64_t staleness, double start_fraction);
// "sync", "semi-sync", "async", "async-kN" -> (k, f). InvalidArgument otherwise.
Status ParseMode(const std::string& name, PlanConfig* config);

// What the run did: DataError when it has no trainer lane with at least warmup + 2 steps.
Result<RunMeasure> MeasureRun(const RunEvents& run, int64_t warmup);
// Costs as above. DataError when an event the fit needs is missing or malformed.
Result<PlanFit> FitRun(const RunEvents& run, int64_t warmup);
// Reads the tp = 1 decode points and the prefill cost of a decode-grid profile (JSON: "decode":
// [[tp, batch, context, seconds], ...], "prefill": [[tp, tokens, seconds], ...]).
// IOError when unreadable, DataError when malformed.
Result<DecodeTable> LoadDecodeTable(const std::string& path);
// The same from the file's text; `source` names it in errors. A point's batch must be a whole
// number in [1, 2^20], its context not negative and its seconds positive.
Result<DecodeTable> ParseDecodeTable(const std::string& text, const std::string& source);

// Least squares y = X b with b >= 0 (every subset of the columns; few columns only), preferring
// fewer and earlier columns: subsets are tried by size, then column order, and a later one is
// taken only when it cuts the squared error by 10%. Rows of X must all have the same size; an
// empty X gives an empty b.
std::vector<double> NonNegativeFit(const std::vector<std::vector<double>>& x, const std::vector<double>& y);

}  // namespace rl::profile
