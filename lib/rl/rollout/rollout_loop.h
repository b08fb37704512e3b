// RunRollout: rl-rollout's work loop.
//
// Each turn: at the batch boundary, switch to a newer weight version from the checkpoint
// directory if there is one; lease whole groups of task `generate` (column prompt_ids), waiting
// inside the get when none are ready; generate one response per row, all rows of the lease in
// one continuous-batching Generate call; then write response_ids, response, logprobs and version
// with the same put that acks the rows for `generate`. So a rollout killed at any point loses
// nothing: its lease expires and the rows go to another rollout. A put refused because the lease
// expired first is logged and counted (the rows are someone else's now).
// A row whose prompt_ids the model cannot take (wrong type, ids outside the vocabulary, no room
// in the context) gets an `error` column instead and is acked, so it cannot stall the loop.
// On *stop the loop finishes the batch in hand, or nacks rows it has not started on, and returns.
//
// With tools, each row is a conversation (conversation.h). The get also asks for the progress
// columns (kProgressColumns), so a row an earlier rollout left mid-way goes on from its last
// completed turn. Each turn starts by looking for newer weights (versions apply per turn and are
// recorded per token), and ends with an update put of every row's progress under the lease, which
// also renews it: a 50-turn conversation never outlives its lease while it makes progress. The
// last put acks the rows with response_ids (every token after the prompt), logprobs, loss_mask
// (0 on tool tokens), token_versions, response (the final answer's text, what rl-reward scores),
// transcript, turns, tool_calls, tool_errors and version (the oldest weight version in it).
// Thread safety: runs on the calling thread; *policy and *events are used from it only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "rl/core/event_log.h"
#include "rl/core/stop_watchdog.h"
#include "rl/model/generate.h"
#include "rl/model/model_dir.h"
#include "rl/queue/client.h"
#include "rl/rollout/conversation.h"
#include "rl/rollout/policy.h"
#include "rl/rollout/weight_sync.h"

namespace rl::rollout {

inline constexpr const char* kGenerateTask = "generate";

struct RolloutOptions {
  ClientOptions client;
  std::string checkpoint_dir;          // newer weight versions come from here (may be empty)
  WeightSync* weights = nullptr;       // may be null; else versions come over UCX, and from
                                       // checkpoint_dir only while it is in fallback
  const model::ModelDir* model = nullptr;  // required: its tokenizer decodes, its eos ends responses
  model::GenerateOptions generate;     // eos_id is set from the model dir; max_new_tokens 0: context
  uint32_t count = 256;                // rows per get (whole groups)
  int64_t lease_ms = 120000;
  std::string holder;                  // names this role's leases ("rollout/ID"); unique among live ones
  int64_t wait_ms = 5000;              // how long one get may wait for rows
  int64_t progress_ms = 10000;         // between progress lines on stderr; 0: none
  uint64_t max_batches = 0;            // stop after this many batches (0: until *stop)
  StopWatchdog* watchdog = nullptr;  // may be null; marks queue calls for it
  EventLog* events = nullptr;          // may be null; must outlive the loop
  // Multi-turn conversations with tools when set (both): rows are conversations, their progress
  // written to the row after every turn and read back when a row comes again (see below).
  env::EnvClient* tools = nullptr;
  const ConversationOptions* conversation = nullptr;
};

struct RolloutStats {
  uint64_t batches = 0, rows = 0, groups = 0, tokens = 0;
  uint64_t lost = 0;       // generated, but the lease had expired before the put
  uint64_t bad_rows = 0;   // rows acked with an `error` column
  uint64_t turns = 0, resumed = 0, resumed_turns = 0;  // conversations: segments generated; rows
                                                       // continued from progress, turns they had
  uint64_t tool_calls = 0, tool_errors = 0;
  double generate_s = 0;   // time inside Generate
};

// REQUIRES: options.model; policy->loaded(), options.checkpoint_dir or options.weights set (the loop then waits
// for a first version). Returns OK after *stop or max_batches; an error when the queue is
// unreachable past the client's give-up time, or generation itself fails.
Status RunRollout(const RolloutOptions& options, Policy* policy, const std::atomic<bool>& stop,
                  RolloutStats* stats = nullptr);

}  // namespace rl::rollout
