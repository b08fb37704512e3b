// rl-profile plan: fits per-role costs to a run's event logs (and/or takes a decode profile),
// calibrates the queue's hand-over latency so the simulator reproduces that run, then simulates
// every split of a pool of slots between rollouts, rewards and trainer ranks under each training
// mode and prints the ranking (man/rl-profile.1, PLAN). With --check RUN it also predicts other
// runs' configurations and compares with what they measured, ending with the line
// `plan error: X.X% ...` (one figure per checked run).
// Thread safety: the subcommand runs on the calling thread.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "rl/core/options.h"
#include "rl/profile/cli.h"
#include "rl/profile/plan_fit.h"

namespace rl::profile {

struct PlanOptions {
  std::string from, decode_profile;
  std::vector<std::string> modes = {"sync", "semi-sync", "async", "async-k2"};
  std::vector<int> trainer_ranks = {1};
  std::vector<std::string> checks;
  int pool = 0;  // 0: the fitted run's rollouts + rewards + 1
  int64_t steps = 60, warmup = 2, micro_batch = 0;  // micro_batch 0: the run's (else 128)
  double cores = 0;  // 0: this machine's; fractional: a measured parallel speed-up
  uint64_t seed = 1;
  bool json = false;
};

struct PlanRow {
  PlanConfig config;
  SimResult result;
};

// The simulator's step time for the fitted run's configuration equals the measured one when the
// hand-over latency is this (bisection; 0 when the role costs alone already reach it).
Result<double> CalibrateHop(const PlanFit& fit, const PlanOptions& o, double cores);

// Every split of the pool under every mode and rank count, fastest first.
Result<std::vector<PlanRow>> SearchPlans(const PlanCosts& costs, const PlanShape& shape, const PlanOptions& o,
                                         int pool, double cores);

Subcommand AddPlanCommand(CommandLine& cl);

}  // namespace rl::profile
