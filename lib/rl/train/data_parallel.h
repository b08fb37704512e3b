// Helpers of data-parallel GRPO (grpo_loop.h, --world N): the small collectives the ranks use to
// agree on a step's batch, and the environment torchrun and srun set.
// Thread safety: functions of a Group, which is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/dist/group.h"

namespace rl::train {

// Every rank's `indices`, rank 0's first (the rows the step trained on, for rank 0's checkpoint).
Result<std::vector<uint64_t>> GatherIndices(dist::Group& group, const std::vector<uint64_t>& indices);

// Element-wise sums over the ranks (float64; counts stay exact below 2^53).
Result<std::vector<double>> SumOverRanks(dist::Group& group, std::vector<double> values);

// Every rank's `value`, by rank.
Result<std::vector<int64_t>> GatherCounts(dist::Group& group, int64_t value);

// How many of its `got[rank]` groups `rank` gives back when the ranks took `excess` groups too
// many: the highest ranks give back first (every rank computes the same split).
int64_t GroupsToGiveBack(const std::vector<int64_t>& got, int64_t excess, int rank);

// The trainer's place in a group: flags (given: set) win over torchrun's WORLD_SIZE, RANK,
// MASTER_ADDR, MASTER_PORT, then srun's SLURM_NTASKS, SLURM_PROCID (the rendezvous then still
// needs the flag or MASTER_ADDR/MASTER_PORT). InvalidArgument (usage) for a non-number, a world
// below 1, a rank outside [0, world), or a world above 1 without a HOST:PORT rendezvous.
// local_rank: the rank's place on its machine, from torchrun's LOCAL_RANK or srun's
// SLURM_LOCALID (-1 when neither is set): which GPU "--device cuda" means for a rank.
struct RankPlace {
  int world = 1, rank = 0;
  std::string rendezvous;
  int local_rank = -1;
};
Result<RankPlace> ResolveRankPlace(const RankPlace& flags, bool world_given, bool rank_given,
                                   const std::map<std::string, std::string>& env);

}  // namespace rl::train
