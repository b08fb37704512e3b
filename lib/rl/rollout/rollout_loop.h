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
// recorded per token), and ends with an update put of every unfinished row's progress under its
// lease, which also renews it: a 50-turn conversation never outlives its lease while it makes
// progress. Each group is put, acking its rows, once its last conversation has ended, with response_ids (every token after the prompt), logprobs, loss_mask
// (0 on tool tokens), token_versions, response (the final answer's text, what rl-reward scores),
// transcript, turns, tool_calls, tool_errors and version (the oldest weight version in it).
//
// New weights during a batch (RolloutOptions::on_new_weights, rl-rollout --on-new-weights):
// kFinish (the default) finishes the batch, or the turn, under the version it began with and
// switches at the next boundary, so every response is one policy's. kInterrupt looks for a new
// version before every decode step (a weights file at most every kInterruptLookMs; a UCX arrival
// at once) and switches mid-generation: the live sequences are prefilled again under the new
// weights and go on (generate.h). Each token keeps the log-prob it was sampled with; the row gets
// token_versions (each token's version) and its version is the OLDEST of them, so the trainer's
// staleness bound stays conservative. Not with a rollout group (the group generates as one).
//
// Refill (RolloutOptions::refill, rl-rollout --refill): a batch does not wait for its longest
// response. Whenever slots are free and no prompt is pending, the loop takes more whole groups
// with a get that does not wait (count: the free slots, at least one group) and starts them in
// the same Generate call (generate.h, streaming), and it puts each group, acking its rows, as
// soon as its last response is done. The call ends, and the loop is at a batch boundary, when
// the queue has nothing ready, a newer weight version has arrived (with finish: taking no more
// prompts, the call drains and the switch follows; with interrupt it switches in the call), a
// row wants a newer version than the policy's (given back), when it has taken kRefillRowsPerSlot
// rows per slot, or on stop. Every lease is a get of
// its own, so a killed rollout loses nothing: the groups not put yet expire with their leases.
// A rollout group takes and puts groups at its checks (AdaptiveOptions::refill); a group lost in
// such a batch gives the rest of its leases back at once and the leader goes on alone. With tools,
// conversations join at turn boundaries: whole groups for the places of those that ended, up to
// `count` conversations going, each get a lease of its own.
// Thread safety: runs on the calling thread; *policy and *events are used from it only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "rl/core/event_log.h"
#include "rl/core/stop_watchdog.h"
#include "rl/dist/group_generate.h"
#include "rl/model/generate.h"
#include "rl/model/model_dir.h"
#include "rl/queue/client.h"
#include "rl/rollout/conversation.h"
#include "rl/rollout/policy.h"
#include "rl/rollout/weight_sync.h"

namespace rl::rollout {

inline constexpr const char* kGenerateTask = "generate";
inline constexpr int64_t kInterruptLookMs = 20;  // between looks at the checkpoint directory
// --refill: a batch takes at most this many rows per slot before it drains. A batch holds every
// response it generated until it ends, and emits its batch event then, so one that never ended
// (interrupt switches without ending it) would grow without bound and stay silent; 16 waves of
// slots between drains keep the tail's cost to a sixteenth of batch by batch's.
inline constexpr int64_t kRefillRowsPerSlot = 16;

enum class OnNewWeights { kFinish, kInterrupt };
// "finish" or "interrupt"; InvalidArgument otherwise.
Result<OnNewWeights> ParseOnNewWeights(const std::string& name);

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
  // A rollout group's leader (group_generate.h) when set: each batch, or with tools each turn's
  // segments, is generated by the group. The loop keeps the leases, the conversations and the
  // tool calls; a rank lost mid-batch gives the leases back (a conversation keeps its completed
  // turns, as when the rollout itself dies).
  dist::GroupLeader* group = nullptr;
  OnNewWeights on_new_weights = OnNewWeights::kFinish;  // see the file comment
  bool refill = false;  // see the file comment
};

struct RolloutStats {
  uint64_t batches = 0, rows = 0, groups = 0, tokens = 0;
  uint64_t lost = 0;       // generated, but the lease had expired before the put
  uint64_t bad_rows = 0;   // rows acked with an `error` column
  uint64_t turns = 0, resumed = 0, resumed_turns = 0;  // conversations: segments generated; rows
                                                       // continued from progress, turns they had
  uint64_t tool_calls = 0, tool_errors = 0;
  double generate_s = 0;   // time inside Generate
  uint64_t refills = 0;    // --refill: gets that added groups to a running batch
  uint64_t switches = 0, interrupted = 0, reprefill_tokens = 0;  // --on-new-weights interrupt
  double switch_s = 0;                                           // of generate_s: prefilling again
};

// REQUIRES: options.model; policy->loaded(), options.checkpoint_dir or options.weights set (the loop then waits
// for a first version). Returns OK after *stop or max_batches; an error when the queue is
// unreachable past the client's give-up time, or generation itself fails.
Status RunRollout(const RolloutOptions& options, Policy* policy, const std::atomic<bool>& stop,
                  RolloutStats* stats = nullptr);

}  // namespace rl::rollout
