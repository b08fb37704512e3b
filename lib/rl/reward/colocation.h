// Colocation: `rl-profile colocation`, rollout time per step with a judge (judge.h) placed two
// ways on the same two cores, measured in one run with dynamic sampling.
//
// A step needs prompts_per_step accepted groups: a group is group_size responses to one prompt,
// sampled from the policy, scored by the judge, and rejected when its rewards are all equal
// (dynamic sampling; its prompt is replaced by a new one). Both placements draw exactly the
// groups they still need, never more, and use the same policy, judge, prompts and options:
//   full     strictly alternating rounds on both cores (2 torch threads): generate every group
//            the step still needs in one batch, then judge them all in one batch, then count the
//            rejected groups and start the next round with that many new prompts;
//   partial  the sampler on core SAMPLER and the judge on core JUDGE (one thread each, pinned):
//            the sampler generates micro_groups groups at a time and hands each micro-batch to
//            the judge as it is done, going on at once while accepted plus in-flight groups fall
//            short of the step; the judge scores each micro-batch as it arrives.
// Steps alternate between the two (full first on even steps, partial first on odd ones), so that
// load from other processes hits both alike; one unmeasured step of each warms up first.
// Rollout time of a step: from its start until the last group it needs is judged. A step that has
// drawn 10 times prompts_per_step groups ends there (a judge that calls every response alike would
// otherwise never fill it; a warning says so).
// Thread safety: runs on the calling thread (and two of its own for partial steps).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/reward/judge.h"

namespace rl::reward {

struct ColocationOptions {
  std::string model;    // the policy's model directory (tokenizer, config)
  std::string weights;  // the policy's weights file (a checkpoint); empty: the directory's
  std::string prompts;  // JSON lines {prompt, answer}
  JudgeOptions judge;
  int64_t group_size = 8, prompts_per_step = 16, micro_groups = 4, steps = 6, max_new_tokens = 8;
  double temperature = 1.0;
  uint64_t seed = 0;
  std::vector<int> cores;  // {sampler, judge}; empty: the first two cores this process may use
  // Non-empty: groups are rejected by this rule verifier's rewards (addition, exact, numeric,
  // math) instead of the judge's, which still scores every response (its cost is what is
  // placed): the rejection rate is then the policy's, whatever the judge learned.
  std::string reject_by;
  bool json = false;
};

struct ColocationStep {
  std::string mode;  // "full" or "partial"
  int64_t step = 0;
  double seconds = 0, generate_s = 0, judge_s = 0;  // generate_s, judge_s: busy time of each role
  int64_t groups = 0, rejected = 0;                 // groups drawn, and rejected by dynamic sampling
};

struct ColocationResult {
  std::vector<ColocationStep> steps;  // measured steps only
  double full_s = 0, partial_s = 0;   // mean rollout time per step
  double full_rejected = 0, partial_rejected = 0;  // share of drawn groups rejected
  double ratio() const { return full_s > 0 ? partial_s / full_s : 0; }
};

// Runs the measurement, printing each step (a table, or JSON lines with options.json) and the
// summary to *out, progress to stderr. InvalidArgument for bad options (cores that this process
// may not use among them), the loaders' errors for the models and the prompts.
Result<ColocationResult> RunColocation(const ColocationOptions& options, std::ostream& out);

}  // namespace rl::reward
