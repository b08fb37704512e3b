// The rollout loop's state and its steps (rollout_loop.h says what the loop does), shared by
// the files that implement it: rollout_loop.cc (the loop, batches, weights, writes),
// rollout_refill.cc (--refill) and rollout_conversations.cc (--tools). Not part of the
// library's interface.
// Thread safety: one thread, RunRollout's.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/clock.h"
#include "rl/model/generate.h"
#include "rl/queue/client.h"
#include "rl/queue/watched_queue.h"
#include "rl/rollout/conversation.h"
#include "rl/rollout/rollout_loop.h"

namespace rl::rollout::detail {

// The group a row counts in: the queue's key of its group column (queue::GroupKey, as rl-queue
// and rl-train know groups by), or a group of its own when it has none. Only counted, never
// stored or sent.
std::string GroupOf(const queue::GotRow& row);

size_t PromptTokens(const std::vector<std::vector<int64_t>>& ids);

// A row's `routes` column (rl-protocol(7)) from Generation::routes of a model with config `c`:
// [N, S, k], u8 when the model has at most 256 experts, i16 up to 32768, else i32.
Tensor RoutesColumn(const std::vector<int32_t>& routes, const model::ModelConfig& c);

// Response lengths of a batch as [min, 25%, median, 75%, max] (nearest rank): what rl-profile plan
// draws the lengths of simulated batches from.
std::vector<size_t> LengthQuartiles(const std::vector<model::Generation>& gens);

class Loop {
 public:
  Loop(const RolloutOptions& o, Policy* policy, RolloutStats* stats)
      : o_(o), policy_(policy), client_(o.client), stats_(stats) {}

  Status Run(const std::atomic<bool>& stop);

 private:
  Status WaitForWeights(const std::atomic<bool>& stop);

  queue::GetRequest GenerateGet(uint32_t count, int64_t wait_ms) const;

  // The newest weight version any row of the lease asks for (its min_version), 0 when none does.
  static int64_t NeededVersion(const queue::GetReply& got);

  // Rows carry the oldest weight version the trainer will take them from (column min_version,
  // set by its feeder): in sync mode the version it publishes just before it feeds them. Waiting
  // for it, up to a quarter of the lease, costs less than rows that would only be regenerated,
  // and makes a sync run's rows a function of their prompts and weights alone (not of whether
  // the weights file or the prompts arrived first).
  Status WaitForVersion(const queue::GetReply& got, const std::atomic<bool>& stop);

  Status Refresh();

  struct Prompts {
    std::vector<std::vector<int64_t>> ids;
    std::vector<uint64_t> indices;  // the row of each prompt
    size_t groups = 0;
  };

  // The prompts of a lease in row order; a row the model cannot take becomes an `error` row of
  // *put instead.
  Prompts Read(const queue::GetReply& got, const model::ModelConfig& config, queue::PutRequest* put);

  // `began`: the version the batch began with. With interrupt, a row's version is the oldest of
  // its tokens' (rollout_loop.h), and token_versions has each token's.
  Status AddResponses(const std::vector<model::Generation>& gens, const Prompts& p, uint64_t began,
                      queue::PutRequest* put);

  // The columns a generated row gets.
  Result<queue::ClientRow> ResponseRow(const model::Generation& g, uint64_t index, uint64_t began) const;

  bool interrupt() const { return o_.on_new_weights == OnNewWeights::kInterrupt && o_.group == nullptr; }

  // For Generate (generate.h): the policy's new weights when a new version came in since the last
  // look. Weights files are looked for at most every kInterruptLookMs; a UCX arrival costs a lock.
  model::NewerWeights NewerWeights();

  void CountSwitches(const model::GenerateStats& gs);
  // A rollout group's layout switches in its last batch (or turn), one "layout" event each, and
  // the refills it took wide, one "layout_stay" event each; returns how many switches (0 without
  // a group).
  size_t EmitLayoutSwitches();

  // Weights of another vocabulary end the batch: its rows are given back and the error returned.
  Status CheckWeights(const queue::GetReply& got);
  Status WeightsFitTheVocabulary() const;  // CheckWeights without the give-back

  // A batch's generation options: the model dir's eos, a seed of the lease's first row.
  model::GenerateOptions BatchOptions(const queue::GetReply& got, const model::Transformer& model, uint64_t began);

  Status Batch(const queue::GetReply& got);

  // --refill (rollout_loop.h): the prompts of one streaming Generate call, the groups they form
  // and the leases they came in.
  struct StreamRow {
    uint64_t index;  // the queue row
    size_t group;    // into StreamState::groups
  };
  struct StreamGroup {
    size_t left = 0;  // rows not done yet
    int64_t tokens = 0;
    queue::PutRequest put;  // acks the group's rows for generate under its lease
  };
  struct StreamState {
    std::vector<StreamRow> rows;  // one per prompt of the call, in its order
    std::vector<StreamGroup> groups;
    std::vector<uint64_t> leases;
    uint64_t group_rows = 1;  // the largest group seen: the least a refill asks for
    size_t prompt_tokens = 0;
    bool draining = false;    // take no more prompts: the call ends when its sequences do
  };

  // Adds a lease's rows to *st and returns their prompts; rows the model cannot take are put at
  // once as `error` rows.
  Result<std::vector<std::vector<int64_t>>> AddLease(const queue::GetReply& got, const model::ModelConfig& config,
                                                     StreamState* st);

  // Whether a newer version waits to be switched to at the next boundary (not with interrupt:
  // the call switches by itself). Weights files are looked for at most every kInterruptLookMs.
  bool NewerReady();

  // For Generate's more_prompts: whole groups from a get that does not wait, unless the call
  // should drain (stop, newer weights, rows that want them).
  model::MorePrompts MoreGroups(const model::ModelConfig& config, StreamState* st, const std::atomic<bool>& stop);

  // For Generate's on_finished: a group is put, its rows acked, when its last row is done.
  model::OnFinished PutGroups(StreamState* st, uint64_t began);

  Status StreamBatch(const queue::GetReply& got, const std::atomic<bool>& stop);

  // Multi-turn rows (rollout_loop.h): the conversations of a batch (one lease's, or with --refill
  // several), with the rows and groups they came in (AddLease's StreamState).
  struct ConversationState {
    StreamState stream;
    std::deque<Conversation> convs;  // one per stream.rows entry; stable addresses for Turn
    std::vector<size_t> lease_of;    // into stream.leases
    std::vector<size_t> from;        // ids already there when it joined (resumed progress)
    std::vector<bool> lost;          // its lease expired: left out, never put
    // It came in done (progress with conv_done = 1: only the put was left) and is not put yet.
    // It takes no turn, so the turns' ends never put it: its group would wait for it forever.
    std::vector<bool> arrived_done;
  };
  Status AddConversations(const queue::GetReply& got, ConversationState* cs);
  Status MoreConversations(ConversationState* cs, const std::atomic<bool>& stop);
  Status PutEnded(const ConversationRunner& runner, const std::vector<bool>& ended, ConversationState* cs);

  // Turns until every conversation is done, their progress written after each, each group put as
  // soon as its last conversation ends; with --refill, more groups join at the turn boundaries.
  Status ConversationBatch(const queue::GetReply& got, const std::atomic<bool>& stop);

  // The progress of the conversations that took a turn and go on (`moves`), an update put per
  // lease that renews it. A lease that is gone (Conflict or NotFound) loses its rows not put yet
  // (logged, counted as lost); any other error gives every lease back and is returned.
  Status WriteProgress(const std::vector<bool>& moves, ConversationState* cs);

  Status AddConversation(const ConversationRunner& runner, const Conversation& c, uint64_t index,
                         queue::PutRequest* put);

  Status Commit(const queue::PutRequest& put, size_t groups, int64_t tokens);

  void Phase(const std::string& phase);

  void Progress(bool final);

  std::string Lost() const;

  struct Mark {
    int64_t at_ms;
    uint64_t rows, tokens;
    double generate_s;
  };
  const RolloutOptions& o_;
  Policy* policy_;
  queue::QueueClient client_;
  queue::WatchedQueue queue_{&client_, o_.watchdog};
  RolloutStats* stats_;
  std::optional<ToolTokens> tool_tokens_;  // with tools
  int64_t start_ms_ = MonoMillis();
  int64_t last_look_ms_ = 0;  // NewerWeights: the last look at the checkpoint directory
  Mark last_{start_ms_, 0, 0, 0};
};

}  // namespace rl::rollout::detail
