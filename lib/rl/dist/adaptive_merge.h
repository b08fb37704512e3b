// Moving a stage's unfinished sequences between layouts (adaptive_generate.h): the collective
// at the heart of a switch, over the whole group.
// Thread safety: every rank calls it at once (SPMD).
#pragma once

#include <vector>

#include <c10/core/Device.h>

#include "rl/core/status.h"
#include "rl/dist/adaptive_generate.h"
#include "rl/dist/group.h"
#include "rl/dist/replica.h"
#include "rl/model/transformer.h"

namespace rl::dist {

// Moves the unfinished sequences of the replicas of degree `from` into those of degree `to`,
// wider (merging them) or narrower (splitting them): `place[k][i]` is the new replica of old
// replica k's i-th sequence (MergeInto). Over the whole group, so that sequences may move between
// any replicas; this rank keeps the sequences of its new replica (rank / to) and, of their KV
// cache, the key/value heads its new shard holds, which the old replica's ranks holding them send
// (every rank of an old replica holds the same sequences; narrower, a new shard's heads come from
// several of them).
Status MoveSequences(Group& group, Replica::Exported mine, int from, int to, const std::vector<std::vector<int>>& place,
                     const model::ModelConfig& config, const c10::Device& device, bool recompute, Replica* merged,
                     SwitchRecord* record);

}  // namespace rl::dist
