// The reference model of the KL term as a role of its own (`rl-train score`, docs/design.md "How
// data flows"). RunRefLoop leases rows of task `ref` (columns prompt_ids and response_ids) in
// batches, computes each response's per-token log-probabilities under the frozen reference model
// (one padded forward pass per micro-batch, logits / temperature as the trainer's), and writes
// them as column `ref_logprobs` (an f32 tensor, one value per response token) with the same put
// that acks the rows for `ref`. So a row is scored once: a role killed between get and put has
// written nothing, its lease runs out or its successor gives it back at start, and the rows are
// scored again; a put after the lease expired is refused whole (Conflict) and counted as lost.
// Rows whose columns cannot be read, or that the model refuses alone, are nacked and logged, as
// rl-reward does. An idle loop waits inside a blocking get.
// Thread safety: runs on the calling thread; *reference, *watchdog and *events are used from it only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/core/stop_watchdog.h"
#include "rl/model/transformer.h"
#include "rl/queue/client.h"
#include "rl/train/sample.h"

namespace rl::train {

inline constexpr const char* kRefTask = "ref";
inline constexpr const char* kRefColumn = "ref_logprobs";
// How a mixture-of-experts reference routed the row it scored: "replayed" (the row's routes,
// rl-train score --routing-replay) or "own". Written beside ref_logprobs; a trainer whose
// --routing-replay disagrees warns (RefRoutingMismatch): its KL term would compare networks that
// route differently.
inline constexpr const char* kRefRoutingColumn = "ref_routing";

// Each sample's response log-probabilities under `model` at `temperature`, one float per response
// token (loss_mask ignored: every response token is scored), by the trainer's own computation
// (MakeTokenBatch, TokenLogprobs): padded batches of up to micro_batch sequences, shortest first.
// No gradient. InvalidArgument for tokens the model cannot read (out of vocabulary, too long).
// With `route_shape` ({S, k}, MakeTokenBatch's) the samples' routes are replayed.
Result<std::vector<std::vector<float>>> ResponseLogprobs(const model::Transformer& model,
                                                         const std::vector<const Sample*>& samples,
                                                         double temperature, int64_t pad_id, int64_t micro_batch,
                                                         const std::vector<int64_t>& route_shape = {});

struct RefLoopOptions {
  ClientOptions client;
  std::string task = kRefTask;
  uint32_t count = 64;          // rows per get
  int64_t micro_batch = 128;    // sequences per forward pass
  double temperature = 1.0;     // the trainer's --temperature
  int64_t pad_id = 0;
  int64_t lease_ms = 60000;
  std::string holder;           // names this role's leases ("ref/ID"); unique among live ones
  int64_t wait_ms = 5000;       // how long one get may wait for rows
  int64_t progress_ms = 10000;  // between progress lines on stderr; 0: none
  uint64_t max_rows = 0;        // stop after this many rows written (0: until *stop)
  // A mixture of experts (rl-train score --routing-replay): ask for the rows' routes too and
  // score with the rollout's experts, as the trainer's policy does; a row without them, or with
  // malformed ones (counted, warned), is scored with the model's own routing.
  bool routing_replay = false;
  StopWatchdog* watchdog = nullptr;  // may be null; marks queue calls for it
  EventLog* events = nullptr;        // may be null; must outlive the loop
};

struct RefStats {
  uint64_t rows = 0;    // written and acked
  uint64_t tokens = 0;  // response tokens of those rows
  uint64_t failed = 0;   // given back (nacked): the model failed on them otherwise (out of memory)
  uint64_t dropped = 0;  // acked unscored: unreadable, or refused by the model (they never will be)
  uint64_t lost = 0;    // scored, but the lease had expired: another instance has them
  uint64_t unreplayable = 0;  // with routing_replay: scored with the model's own routing, routes malformed
  double compute_s = 0; // in forward passes
};

// Runs until *stop (it then finishes the batch in hand), max_rows, or a fatal error (the queue
// unreachable past the client's give-up time: Unavailable). *stats may be null.
Status RunRefLoop(const RefLoopOptions& options, const model::Transformer& reference, const std::atomic<bool>& stop,
                  RefStats* stats = nullptr);

}  // namespace rl::train
