// The rule of adaptive generation (adaptive_generate.h): from the loads a check exchanged, which
// degree the stage takes next. Pure functions of the loads, the options and the predictor, so
// that every rank that holds the same loads decides alike (rank 0's answer is still broadcast,
// as the ranks' calibrations differ).
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <vector>

#include "rl/dist/adaptive_generate.h"
#include "rl/dist/latency_model.h"

namespace rl::dist {

// The decision at a check: the degree to go to (Decide: 0, stay) and the estimate it was taken on.
struct Decision {
  int to = 0;
  SwitchEstimate estimate;
  int weighed = 0;  // DecideNarrow: the narrower degree `estimate` is of, taken or not
};

// Widening, once nothing is pending: the best wider degree of `degrees` the predictor knows, when
// it wins by o.margin over staying at tp (with o.force_switch_check, the next wider one from
// that check on, whatever the predictor). `this_check` counts the stage's checks from 0.
Decision Decide(const AdaptiveOptions& o, const LatencyModel* predictor, const std::vector<int>& degrees, int tp,
                int n, int this_check, const std::vector<ReplicaLoad>& replicas);

// Where refilled prompts go: each to the replica holding the fewest sequences (ties: the lower
// index), from `held` per replica. Every rank deals alike.
std::vector<int> Deal(std::vector<int64_t> held, int64_t count);

// New prompts (`added`: length and token budget each) while the stage is wider than start_tp:
// the degree to narrow to, or tp to stay and deal them to the wide replicas (see the .cc).
Decision DecideNarrow(const AdaptiveOptions& o, const LatencyModel* predictor, const std::vector<int>& degrees, int tp,
                      int n, const std::vector<ReplicaLoad>& replicas, const ReplicaLoad& added);

}  // namespace rl::dist
