// MeasureDecodeGrid: PAT's offline profile, measured on the ranks of a group: the per-step decode
// latency at each tensor-parallel degree t of ProfiledDegrees (the N/t replicas of degree t
// measuring at once, as they would run: at 1 every rank a replica of its own, at N one replica
// over all ranks) on a grid of batch sizes and context lengths (dummy batches of random prefixes,
// denser at short contexts), the prefill latency met on the way, and the switch costs (resharding
// the weights, the slowest degree's; the group's all-gather bandwidth).
// Every rank returns the same LatencyModel (the ranks' figures averaged), so that decisions
// taken from it agree.
// Thread safety: every rank calls it at once (SPMD).
#pragma once

#include <cstdint>
#include <vector>

#include "rl/core/status.h"
#include "rl/dist/group.h"
#include "rl/dist/latency_model.h"
#include "rl/model/transformer.h"

namespace rl::dist {

struct DecodeGridOptions {
  std::vector<int64_t> batches = {1, 2, 4, 8};  // per replica at degree 1; t times these at degree t
  std::vector<int64_t> lengths = {16, 64, 256};  // context per sequence
  int steps = 4;                                 // decode steps timed per point (the median is kept)
  uint64_t seed = 1;
};

// The degrees profiled for a group of `ranks`: 1, 2, 4, ... up to ranks, those dividing it over
// which the model splits, and ranks itself when it splits (3 ranks: 1 and 3).
std::vector<int> ProfiledDegrees(const model::ModelConfig& config, int ranks);

Result<LatencyModel> MeasureDecodeGrid(Group& group, const model::Transformer& whole,
                                       const DecodeGridOptions& options);

}  // namespace rl::dist
