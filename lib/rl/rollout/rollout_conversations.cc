// Multi-turn conversations with tools in the rollout loop (rollout_loop.h): a lease's
// conversations turn by turn, their progress written to their rows after each turn.
#include <algorithm>

#include "rl/core/log.h"
#include "rl/rollout/rollout_loop_impl.h"

namespace rl::rollout::detail {

using queue::GotRow;

// Multi-turn rows (rollout_loop.h): turns until every conversation of the lease is done, its
// progress written after each; then one put that acks them all.
Status Loop::ConversationBatch(const queue::GetReply& got, const std::atomic<bool>& stop) {
  Phase("generate");
  queue::PutRequest put;
  put.ack_task = kGenerateTask;
  put.ack_lease = got.lease;
  Prompts prompts = Read(got, policy_->model().config(), &put);
  std::vector<Conversation> convs;
  for (size_t i = 0; i < prompts.ids.size(); ++i) {
    const GotRow& row = *std::find_if(got.rows.begin(), got.rows.end(),
                                      [&](const GotRow& r) { return r.index == prompts.indices[i]; });
    Result<Conversation> c = FromProgress(prompts.ids[i], row.columns);
    if (!c.ok()) {  // progress nobody can continue: start the conversation again
      spdlog::warn("row {}: {}; starting the conversation again", row.index, c.status().message());
      c = FromProgress(prompts.ids[i], {});
    }
    if (c->turns > 0) {
      ++stats_->resumed;
      stats_->resumed_turns += static_cast<uint64_t>(c->turns);
      if (o_.events) o_.events->Emit("resume", {{"row", row.index}, {"turns", c->turns}, {"tokens", c->ids.size()}});
    }
    convs.push_back(std::move(*c));
  }
  std::vector<Conversation*> all;
  for (Conversation& c : convs) all.push_back(&c);
  ConversationOptions co = *o_.conversation;
  if (interrupt()) co.generate.newer_weights = NewerWeights();
  SegmentGenerator on_group;  // a rollout group generates each turn's segments as one
  if (o_.group != nullptr) {
    on_group = [this](const model::Transformer& model, uint64_t version, const std::vector<std::vector<int64_t>>& p,
                      const model::GenerateOptions& go, model::GenerateStats* gs) {
      auto out = o_.group->Generate(model, version, p, go, gs);
      if (out.ok()) EmitLayoutSwitches();
      return out;
    };
  }
  ConversationRunner runner(*o_.model, co, *tool_tokens_, std::move(on_group));
  ToolRunner tools = [this](const std::vector<env::ToolCall>& calls) { return o_.tools->Call(calls); };
  TurnStats ts;
  const uint64_t seed = o_.generate.seed ^ (0x9e3779b97f4a7c15ULL * (got.rows.front().index + 1));
  int64_t start = MonoMillis();
  for (int64_t turn = 0;; ++turn) {
    std::vector<uint64_t> going;
    std::vector<int64_t> at;  // the turn each starts now (0 = first): the drill counts repeats
    std::vector<bool> moves(convs.size(), false);  // takes this turn: its progress changes
    for (size_t i = 0; i < convs.size(); ++i) {
      if (convs[i].done) continue;
      going.push_back(prompts.indices[i]);
      at.push_back(convs[i].turns);
      moves[i] = true;
    }
    if (going.empty()) break;
    if (turn > 0) RL_RETURN_IF_ERROR(Refresh());  // weight versions apply per turn
    if (o_.events) o_.events->Emit("turn", {{"rows", going}, {"turns", at}, {"version", policy_->version()}});
    Phase("generate");
    Status s = runner.Turn(policy_->model(), policy_->version(), all, tools,
                           seed + 0x632be59bd9b4e019ULL * static_cast<uint64_t>(turn), &ts);
    if (!s.ok()) {
      (void)queue_.Nack(kGenerateTask, got.lease, {});  // the progress written so far stays
      return s;
    }
    ++stats_->turns;
    if (stop.load() && !std::all_of(convs.begin(), convs.end(), [](const Conversation& c) { return c.done; })) {
      // Stopping: keep this turn's progress and give the rows back for another rollout.
      RL_ASSIGN_OR_RETURN(bool written, WriteProgress(got, prompts, convs, moves));
      if (!written) return Status::OK();
      (void)queue_.Nack(kGenerateTask, got.lease, {});
      spdlog::info("stopping: {} conversations given back after their turn", going.size());
      return Status::OK();
    }
    if (std::any_of(convs.begin(), convs.end(), [](const Conversation& c) { return !c.done; })) {
      RL_ASSIGN_OR_RETURN(bool written, WriteProgress(got, prompts, convs, moves));
      if (!written) return Status::OK();  // the lease is gone: the rows are someone else's now
    }
  }
  double seconds = (MonoMillis() - start) / 1000.0;
  stats_->tool_calls += static_cast<uint64_t>(ts.tool_calls);
  stats_->tool_errors += static_cast<uint64_t>(ts.tool_errors);
  for (size_t i = 0; i < convs.size(); ++i) RL_RETURN_IF_ERROR(AddConversation(runner, convs[i], prompts.indices[i], &put));
  Phase("write");
  RL_RETURN_IF_ERROR(Commit(put, prompts.groups, ts.new_tokens));
  stats_->generate_s += ts.generate_s;
  CountSwitches(ts.switching);
  ++stats_->batches;
  if (o_.events) {
    o_.events->Emit("batch", {{"rows", got.rows.size()}, {"groups", prompts.groups}, {"tokens", ts.new_tokens},
                              {"seconds", seconds}, {"generate_seconds", ts.generate_s},
                              {"tool_seconds", ts.tools_s}, {"segments", ts.segments},
                              {"tool_calls", ts.tool_calls}, {"tool_errors", ts.tool_errors},
                              {"version", policy_->version()}, {"lease", got.lease},
                              {"switches", ts.switching.switches}, {"interrupted", ts.switching.interrupted},
                              {"reprefill_tokens", ts.switching.reprefill_tokens},
                              {"switch_seconds", ts.switching.switch_s}});
  }
  return Status::OK();
}

// The progress of the conversations that took this turn (`moves`; the others' is in their rows
// already), as one update put that renews the whole lease. False when the lease is gone (Conflict
// or NotFound: logged and counted as lost rows); any other error gives the rows back and is
// returned, as Commit does.
Result<bool> Loop::WriteProgress(const queue::GetReply& got, const Prompts& prompts,
                               const std::vector<Conversation>& convs, const std::vector<bool>& moves) {
  Phase("write-progress");
  queue::PutRequest put;
  put.update_task = kGenerateTask;
  put.update_lease = got.lease;
  put.renew_ms = o_.lease_ms;
  for (size_t i = 0; i < convs.size(); ++i) {
    if (moves[i]) put.rows.push_back({prompts.indices[i], ProgressColumns(convs[i])});
  }
  auto done = queue_.Put(put);
  if (done.ok()) return true;
  if (done.status().code() != Code::kConflict && done.status().code() != Code::kNotFound) {
    (void)queue_.Nack(kGenerateTask, got.lease, {});
    return done.status();
  }
  spdlog::warn("progress of {} conversations not written: {}", convs.size(), done.status().message());
  if (o_.events) o_.events->Emit("lease_lost", {{"rows", convs.size()}, {"error", done.status().ToString()}});
  stats_->lost += convs.size();
  return false;
}

Status Loop::AddConversation(const ConversationRunner& runner, const Conversation& c, uint64_t index,
                           queue::PutRequest* put) {
  RL_ASSIGN_OR_RETURN(std::string answer, runner.Answer(c));
  RL_ASSIGN_OR_RETURN(std::string transcript, runner.Transcript(c));
  int64_t oldest = c.OldestVersion();
  put->rows.push_back({index,
                       {{"response_ids", Tensor::FromI64(c.ids)},
                        {"logprobs", Tensor::FromF32(c.logprobs)},
                        {"loss_mask", Tensor::FromI64(c.mask)},
                        {"token_versions", Tensor::FromI64(c.versions)},
                        {"turn_ends", Tensor::FromI64(c.turn_ends)},
                        {"turn_rewards", Tensor::FromF32(c.turn_rewards)},
                        {"response", std::move(answer)},
                        {"transcript", std::move(transcript)},
                        {"turns", c.turns},
                        {"tool_calls", c.tool_calls},
                        {"tool_errors", c.tool_errors},
                        {"version", oldest >= 0 ? oldest : static_cast<int64_t>(policy_->version())}}});
  return Status::OK();
}

}  // namespace rl::rollout::detail
