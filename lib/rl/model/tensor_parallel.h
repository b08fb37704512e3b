// Tensor parallelism for the decoder (Megatron-LM's layout): a model split over `size` ranks,
// each holding a shard, that together compute what the whole model computes.
//
// The split, per decoder layer:
//   attention: rank r holds query heads [r*H/t, (r+1)*H/t) and key/value heads [r*G/t, (r+1)*G/t)
//     (grouped-query attention stays within a rank: query head h reads key/value head h / (H/G),
//     and both ranges are contiguous), so q_proj, k_proj and v_proj are split by rows (their
//     biases with them) and o_proj by columns; the partial outputs are summed by an all-reduce.
//     o_proj's bias is held by rank 0 only (the others hold zeros), so the sum adds it once.
//   mlp: gate_proj and up_proj split by rows, down_proj by columns, then an all-reduce.
//   Qwen3-MoE's and Mixtral's sparse mlp: each expert split as a dense mlp is (Mixtral's w1 and
//   w3 as gate_proj and up_proj, w2 as down_proj), the router (gate) replicated, and one
//   all-reduce of the weighted sum of the experts' partial outputs.
//   Everything else (embeddings, norms, q_norm/k_norm, the LM head) is replicated.
// Two all-reduces per layer, as in Megatron. Each rank's KV cache holds its G/t key/value heads.
// Every rank runs the same calls with the same inputs (SPMD); since an all-reduce gives every rank
// the same bits, the logits, and so greedy and seeded sampling, agree on all ranks.
//
// The communication is a callback, so that this library does not depend on a communication
// backend: lib/rl/dist provides one over torch.distributed c10d (Gloo).
// This header does not include libtorch's heavy headers.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/config.h"
#include "rl/model/transformer.h"

namespace rl::model {

struct TensorParallel {
  int64_t rank = 0;
  int64_t size = 1;
  // Sums `t` over the ranks in place; every rank must call it in the same order. Required when
  // size > 1. It throws PeerLost (torch_guard.h) when the group is broken (a rank died or timed
  // out); the model's entry points return that as Status::Unavailable.
  std::function<void(at::Tensor& t)> all_reduce;
};

// Config error unless the model splits over `size` ranks: size >= 1 dividing the attention heads,
// the key/value heads and the MLP's intermediate size (and the experts', where there are any).
Status CheckTensorParallel(const ModelConfig& config, int64_t size);

// The dimension along which the named parameter is split (0: rows, 1: columns), or -1 when every
// rank holds all of it. o_proj's bias (-1) is the one replicated tensor that is not a copy: see
// ShardTensor.
int SplitDim(const std::string& name);

// Rank `rank`'s shard of the full tensor `full` named `name`. REQUIRES: CheckTensorParallel OK.
at::Tensor ShardTensor(const std::string& name, const at::Tensor& full, int64_t rank, int64_t size);

// Every tensor of a full state dict replaced by rank's shard, in the same order.
Result<NamedTensors> ShardNamedTensors(const NamedTensors& full, const ModelConfig& config,
                                       int64_t rank, int64_t size);

// The full tensor from the shards of all ranks (shards[r] from rank r): the inverse of
// ShardTensor.
at::Tensor UnshardTensor(const std::string& name, const std::vector<at::Tensor>& shards);

}  // namespace rl::model
