// Replica: one data-parallel replica's continuous batch, decoded one round at a time, whose
// unfinished sequences can be taken out with their state and put into another replica: what the
// adaptive engine (adaptive_generate.h) needs to switch between tensor-parallel configurations
// in the middle of a generation stage without restarting anything.
//
// A round: refill free slots from the pending prompts (a prefill each), sample the next token of
// every active sequence, feed the tokens of those that go on. Stop rules are Generate's
// (model::StopsAfter). Under tensor parallelism every rank of the group holds a Replica over its
// shard with the same sequences and calls the same methods (SPMD); they stay identical because
// the logits are.
// The state of a sequence between rounds: its tokens so far, its KV cache (the keys and values of
// every position but none pending) and the logits that its next token will be drawn from. With
// GenerateOptions::record_routes, its generation's routes are those of every token in the cache.
// Thread safety: none.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/generate.h"
#include "rl/model/kv_cache.h"
#include "rl/model/sampler.h"
#include "rl/model/transformer.h"

namespace rl::dist {

// An unfinished sequence, as it moves between replicas.
struct SequenceState {
  int64_t prompt = 0;                  // index into the stage's prompts
  std::vector<int64_t> tokens;         // prompt + response so far; all of them are in the cache
  model::Generation generation;        // the response so far
  at::Tensor logits;                   // [V] float32: what the next token is drawn from
};

struct RoundStats {
  int64_t batch = 0;           // sequences that sampled a token this round
  int64_t context_tokens = 0;  // their total length before the round's token: attention's work
  int64_t prefills = 0;        // prompts started this round
};

class Replica {
 public:
  // `slots` sequences at once. `prompts` and `options` must outlive the replica; options are
  // those of model::Generate (slots is taken from the argument).
  static Result<Replica> Create(const model::Transformer* model, int64_t slots,
                                const std::vector<std::vector<int64_t>>* prompts,
                                const model::GenerateOptions* options, uint64_t seed);

  void AddPending(int64_t prompt) { pending_.push_back(prompt); }
  int64_t pending() const { return static_cast<int64_t>(pending_.size()); }
  int64_t active() const;
  bool done() const { return pending_.empty() && active() == 0; }
  // Whether its sequences record routes (GenerateOptions::record_routes, a mixture of experts).
  bool records_routes() const;

  // One round (see above). Finished responses go to (*out)[prompt].
  Result<RoundStats> Round(std::vector<model::Generation>* out);

  // The active sequences (slot order), for the coordinator: their lengths and their remaining
  // token budgets.
  std::vector<std::pair<int64_t, int64_t>> LengthsAndBudgets() const;

  // Removes the active sequences and returns them with the cache entries of every layer:
  // keys[l] and values[l] are [n, kv_heads, max_len, head_dim] (n the number returned, max_len
  // their longest length; shorter ones padded with zeros).
  struct Exported {
    std::vector<SequenceState> sequences;
    std::vector<at::Tensor> keys, values;
  };
  Result<Exported> TakeActive();
  // Puts sequences into free slots with the cache entries given (same layout as TakeActive, for
  // this replica's key/value heads). InvalidArgument when there are not enough free slots.
  Status PutActive(std::vector<SequenceState> sequences, const std::vector<at::Tensor>& keys,
                   const std::vector<at::Tensor>& values);
  // Puts sequences into free slots by running their tokens through the model again (a prefill
  // each): the other way to move state, cheaper than moving the cache when it is large and the
  // sequences are short. The logits are recomputed too.
  Status RecomputeActive(std::vector<SequenceState> sequences);

 private:
  struct Slot {
    bool busy = false;
    SequenceState seq;
  };
  Replica(const model::Transformer* model, model::KvCache cache,
          const std::vector<std::vector<int64_t>>* prompts, const model::GenerateOptions* options,
          model::Sampler sampler);
  int64_t Cap(int64_t prompt) const;
  // The free slots; InvalidArgument when fewer than `wanted`.
  Result<std::vector<int64_t>> FreeSlots(size_t wanted) const;
  Status Prefill(int64_t slot, const std::vector<int64_t>& tokens);
  // Routes that record the experts of the tokens fed into *used (GenerateOptions::record_routes,
  // a mixture of experts), else none.
  model::Routes Recording(at::Tensor* used) const;

  const model::Transformer* model_;
  model::KvCache cache_;
  const std::vector<std::vector<int64_t>>* prompts_;
  const model::GenerateOptions* options_;
  model::Sampler sampler_;
  std::vector<Slot> slots_;
  std::deque<int64_t> pending_;
};

}  // namespace rl::dist
