// Multi-turn conversations with tools in the rollout loop (rollout_loop.h): a lease's
// conversations turn by turn, their progress written to their rows after each turn.
#include <algorithm>

#include "rl/core/log.h"
#include "rl/rollout/rollout_loop_impl.h"

namespace rl::rollout::detail {

using queue::GotRow;

// Adds the conversations of a lease's rows to *cs (AddLease groups them; rows the model cannot
// take are put at once as `error` rows): each from its progress columns, or from the start when
// there are none or nobody can continue them.
Status Loop::AddConversations(const queue::GetReply& got, ConversationState* cs) {
  const size_t first = cs->stream.rows.size();
  RL_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> ids, AddLease(got, policy_->model().config(), &cs->stream));
  for (size_t k = 0; k < ids.size(); ++k) {
    const uint64_t index = cs->stream.rows[first + k].index;
    const GotRow& row =
        *std::find_if(got.rows.begin(), got.rows.end(), [&](const GotRow& r) { return r.index == index; });
    const int64_t vocab = policy_->model().config().vocab_size;
    Result<Conversation> c = FromProgress(ids[k], row.columns, vocab);
    if (!c.ok()) {  // progress nobody can continue: start the conversation again
      spdlog::warn("row {}: {}; starting the conversation again", row.index, c.status().message());
      c = FromProgress(std::move(ids[k]), {}, vocab);
    }
    if (c->turns > 0) {
      ++stats_->resumed;
      stats_->resumed_turns += static_cast<uint64_t>(c->turns);
      if (o_.events) o_.events->Emit("resume", {{"row", row.index}, {"turns", c->turns}, {"tokens", c->ids.size()}});
    }
    cs->lease_of.push_back(cs->stream.leases.size() - 1);
    cs->from.push_back(c->ids.size());
    cs->lost.push_back(false);
    cs->arrived_done.push_back(c->done);
    cs->convs.push_back(std::move(*c));
  }
  return Status::OK();
}

// --refill with tools, at a turn boundary: whole groups for the conversations that ended, from a
// get that does not wait, up to --count conversations going (as MoreGroups, with the same
// kRefillRowsPerSlot cap on a batch). Rows that want a newer version than the policy's go back
// and are asked for again at the next boundary (weights apply per turn).
Status Loop::MoreConversations(ConversationState* cs, const std::atomic<bool>& stop) {
  if (!o_.refill || cs->stream.draining) return Status::OK();
  const auto rows = static_cast<int64_t>(cs->stream.rows.size());
  if (stop.load() || rows >= kRefillRowsPerSlot * std::max<int64_t>(o_.generate.slots, 1)) {
    cs->stream.draining = true;
    return Status::OK();
  }
  int64_t going = 0;
  for (const Conversation& c : cs->convs) going += c.done ? 0 : 1;
  const int64_t free = static_cast<int64_t>(o_.count) - going;
  if (free < 1) return Status::OK();
  const uint64_t count = std::max<uint64_t>(static_cast<uint64_t>(free), cs->stream.group_rows);
  RL_ASSIGN_OR_RETURN(queue::GetReply got, queue_.Get(GenerateGet(static_cast<uint32_t>(count), 0)));
  if (got.rows.empty()) return Status::OK();
  if (NeededVersion(got) > static_cast<int64_t>(policy_->version())) {
    (void)queue_.Nack(kGenerateTask, got.lease, {});
    return Status::OK();
  }
  ++stats_->refills;
  return AddConversations(got, cs);
}

// The conversations that ended in this turn (`ended`) join their groups' puts; a group is put,
// acking its rows, when its last conversation has ended.
Status Loop::PutEnded(const ConversationRunner& runner, const std::vector<bool>& ended, ConversationState* cs) {
  for (size_t i = 0; i < cs->convs.size(); ++i) {
    if (!ended[i] || cs->lost[i]) continue;
    const Conversation& c = cs->convs[i];
    StreamGroup& group = cs->stream.groups[cs->stream.rows[i].group];
    RL_RETURN_IF_ERROR(AddConversation(runner, c, cs->stream.rows[i].index, &group.put));
    for (size_t t = cs->from[i]; t < c.mask.size(); ++t) group.tokens += c.mask[t];
    if (--group.left > 0) continue;
    RL_RETURN_IF_ERROR(Commit(group.put, 1, group.tokens));
    group.put.rows.clear();
  }
  return Status::OK();
}

// Multi-turn rows (rollout_loop.h): turns until every conversation of the batch is done, their
// progress written after each; each group put as soon as its last conversation ends; with
// --refill, more groups taken at the turn boundaries.
Status Loop::ConversationBatch(const queue::GetReply& got, const std::atomic<bool>& stop) {
  Phase("generate");
  RL_RETURN_IF_ERROR(CheckWeights(got));
  ConversationState cs;
  RL_RETURN_IF_ERROR(AddConversations(got, &cs));
  ConversationOptions co = *o_.conversation;
  if (interrupt()) co.generate.newer_weights = NewerWeights();
  SegmentGenerator on_group;  // a rollout group generates each turn's segments as one
  size_t layouts = 0, stays = 0;  // its layout switches and stays over the batch's turns
  if (o_.group != nullptr) {
    on_group = [this, &layouts, &stays](const model::Transformer& model, uint64_t version,
                                        const std::vector<std::vector<int64_t>>& p, const model::GenerateOptions& go,
                                        model::GenerateStats* gs) {
      auto out = o_.group->Generate(model, version, p, go, gs);
      if (out.ok()) {
        layouts += EmitLayoutSwitches();
        stays += o_.group->last_stays().size();
      }
      return out;
    };
  }
  ConversationRunner runner(*o_.model, co, *tool_tokens_, std::move(on_group));
  ToolRunner tools = [this](const std::vector<env::ToolCall>& calls) { return o_.tools->Call(calls); };
  auto give_back = [&] {  // what is not put yet goes back to the queue at once
    for (uint64_t lease : cs.stream.leases) (void)queue_.Nack(kGenerateTask, lease, {});
  };
  TurnStats ts;
  const uint64_t seed = o_.generate.seed ^ (0x9e3779b97f4a7c15ULL * (got.rows.front().index + 1));
  const uint64_t refills = stats_->refills;
  int64_t start = MonoMillis();
  for (int64_t turn = 0;; ++turn) {
    if (turn > 0) {
      Status s = Refresh();  // weight versions apply per turn
      if (s.ok()) s = WeightsFitTheVocabulary();  // another vocabulary: the rows go back (exit 78)
      if (s.ok()) s = MoreConversations(&cs, stop);
      if (!s.ok()) {
        give_back();
        return s;
      }
    }
    if (std::any_of(cs.arrived_done.begin(), cs.arrived_done.end(), [](bool d) { return d; })) {
      if (Status put = PutEnded(runner, cs.arrived_done, &cs); !put.ok()) {
        give_back();
        return put;
      }
      std::fill(cs.arrived_done.begin(), cs.arrived_done.end(), false);
    }
    std::vector<uint64_t> going;
    std::vector<int64_t> at;  // the turn each starts now (0 = first): the drill counts repeats
    std::vector<bool> moves(cs.convs.size(), false);  // takes this turn: its progress changes
    std::vector<Conversation*> all;
    for (size_t i = 0; i < cs.convs.size(); ++i) {
      all.push_back(&cs.convs[i]);
      if (cs.convs[i].done) continue;
      going.push_back(cs.stream.rows[i].index);
      at.push_back(cs.convs[i].turns);
      moves[i] = true;
    }
    if (going.empty()) break;
    if (o_.events) o_.events->Emit("turn", {{"rows", going}, {"turns", at}, {"version", policy_->version()}});
    Phase("generate");
    Status s = runner.Turn(policy_->model(), policy_->version(), all, tools,
                           seed + 0x632be59bd9b4e019ULL * static_cast<uint64_t>(turn), &ts);
    if (!s.ok()) {
      give_back();  // the progress written so far stays
      return s;
    }
    ++stats_->turns;
    std::vector<bool> ended(cs.convs.size(), false), unfinished(cs.convs.size(), false);
    for (size_t i = 0; i < cs.convs.size(); ++i) {
      ended[i] = moves[i] && cs.convs[i].done;
      unfinished[i] = moves[i] && !cs.convs[i].done;
    }
    if (Status put = PutEnded(runner, ended, &cs); !put.ok()) {
      give_back();
      return put;
    }
    if (std::none_of(unfinished.begin(), unfinished.end(), [](bool u) { return u; })) continue;
    RL_RETURN_IF_ERROR(WriteProgress(unfinished, &cs));
    if (stop.load()) {
      // Stopping: this turn's progress is kept; the rows go back for another rollout.
      give_back();
      spdlog::info("stopping: {} conversations given back after their turn",
                   std::count(unfinished.begin(), unfinished.end(), true));
      return Status::OK();
    }
  }
  double seconds = (MonoMillis() - start) / 1000.0;
  stats_->tool_calls += static_cast<uint64_t>(ts.tool_calls);
  stats_->tool_errors += static_cast<uint64_t>(ts.tool_errors);
  stats_->generate_s += ts.generate_s;
  CountSwitches(ts.switching);
  ++stats_->batches;
  if (o_.events) {
    o_.events->Emit("batch", {{"rows", cs.stream.rows.size()}, {"groups", cs.stream.groups.size()},
                              {"tokens", ts.new_tokens}, {"seconds", seconds}, {"generate_seconds", ts.generate_s},
                              {"tool_seconds", ts.tools_s}, {"segments", ts.segments},
                              {"tool_calls", ts.tool_calls}, {"tool_errors", ts.tool_errors},
                              {"version", policy_->version()}, {"lease", got.lease},
                              {"leases", cs.stream.leases.size()}, {"refills", stats_->refills - refills},
                              {"prompt_tokens", cs.stream.prompt_tokens},
                              {"switches", ts.switching.switches}, {"interrupted", ts.switching.interrupted},
                              {"reprefill_tokens", ts.switching.reprefill_tokens},
                              {"switch_seconds", ts.switching.switch_s},
                              {"layout_switches", layouts}, {"layout_stays", stays}});
  }
  return Status::OK();
}

// The progress of the conversations that took this turn and go on (`moves`; the others' is in
// their rows already), one update put per lease, which renews it. A lease that is gone (Conflict
// or NotFound) loses its rows not put yet: logged, counted as lost, and left out of later turns.
// Any other error gives every lease back and is returned, as Commit does.
Status Loop::WriteProgress(const std::vector<bool>& moves, ConversationState* cs) {
  Phase("write-progress");
  for (size_t lease = 0; lease < cs->stream.leases.size(); ++lease) {
    queue::PutRequest put;
    put.update_task = kGenerateTask;
    put.update_lease = cs->stream.leases[lease];
    put.renew_ms = o_.lease_ms;
    for (size_t i = 0; i < cs->convs.size(); ++i) {
      if (moves[i] && cs->lease_of[i] == lease) put.rows.push_back({cs->stream.rows[i].index, ProgressColumns(cs->convs[i])});
    }
    if (put.rows.empty()) continue;
    auto done = queue_.Put(put);
    if (done.ok()) continue;
    if (done.status().code() != Code::kConflict && done.status().code() != Code::kNotFound) {
      for (uint64_t l : cs->stream.leases) (void)queue_.Nack(kGenerateTask, l, {});
      return done.status();
    }
    // The rows are someone else's now: those of its groups not put yet leave the batch.
    size_t gone = 0;
    for (size_t i = 0; i < cs->convs.size(); ++i) {
      if (cs->lease_of[i] != lease || cs->lost[i]) continue;
      StreamGroup& group = cs->stream.groups[cs->stream.rows[i].group];
      if (group.left == 0) continue;  // put already
      cs->lost[i] = true;
      cs->convs[i].done = true;
      ++gone;
    }
    for (size_t i = 0; i < cs->convs.size(); ++i) {
      if (cs->lease_of[i] == lease) cs->stream.groups[cs->stream.rows[i].group].left = 0;
    }
    spdlog::warn("progress of {} conversations not written: {}", put.rows.size(), done.status().message());
    if (o_.events) o_.events->Emit("lease_lost", {{"rows", gone}, {"error", done.status().ToString()}});
    stats_->lost += gone;
  }
  return Status::OK();
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
  if (!c.routes.empty()) put->rows.back().columns.push_back({"routes", RoutesColumn(c.routes, policy_->model().config())});
  return Status::OK();
}

}  // namespace rl::rollout::detail
