// rl-rollout --refill (rollout_loop.h): one streaming Generate call per batch, taking more
// groups from the queue as slots free and putting each group as soon as it is done.
#include <algorithm>
#include <map>

#include <spdlog/spdlog.h>

#include "rl/rollout/rollout_loop_impl.h"

namespace rl::rollout::detail {

using queue::GotRow;

// Adds a lease's rows to *st and returns their prompts; rows the model cannot take are put at
// once as `error` rows.
Result<std::vector<std::vector<int64_t>>> Loop::AddLease(const queue::GetReply& got, const model::ModelConfig& config,
                                                       StreamState* st) {
  st->leases.push_back(got.lease);
  queue::PutRequest bad;
  bad.ack_task = kGenerateTask;
  bad.ack_lease = got.lease;
  Prompts p = Read(got, config, &bad);
  if (!bad.rows.empty()) RL_RETURN_IF_ERROR(Commit(bad, 0, 0));
  st->prompt_tokens += PromptTokens(p.ids);
  std::map<uint64_t, std::string> key_of;
  for (const GotRow& row : got.rows) key_of[row.index] = GroupOf(row);
  std::map<std::string, size_t> group_of;
  for (uint64_t index : p.indices) {
    auto [it, fresh] = group_of.try_emplace(key_of[index], st->groups.size());
    if (fresh) {
      st->groups.emplace_back();
      st->groups.back().put.ack_task = kGenerateTask;
      st->groups.back().put.ack_lease = got.lease;
    }
    StreamGroup& g = st->groups[it->second];
    st->group_rows = std::max<uint64_t>(st->group_rows, ++g.left);
    st->rows.push_back({index, it->second});
  }
  return std::move(p.ids);
}

// Whether a newer version waits to be switched to at the next boundary (not with interrupt:
// the call switches by itself). Weights files are looked for at most every kInterruptLookMs.
bool Loop::NewerReady() {
  if (interrupt()) return false;
  if (o_.weights && o_.weights->HasNewer(policy_->version())) return true;
  if (o_.checkpoint_dir.empty() || (o_.weights && !o_.weights->InFallback())) return false;
  const int64_t now = MonoMillis();
  if (now - last_look_ms_ < kInterruptLookMs) return false;
  last_look_ms_ = now;
  auto file = policy_->Newer(o_.checkpoint_dir);
  return file.ok() && file->has_value();
}

// For Generate's more_prompts: whole groups from a get that does not wait, unless the call
// should drain (stop, newer weights, rows that want them, kRefillRowsPerSlot).
model::MorePrompts Loop::MoreGroups(const model::ModelConfig& config, StreamState* st, const std::atomic<bool>& stop) {
  return [this, &config, st, &stop](int64_t free) -> Result<std::vector<std::vector<int64_t>>> {
    const bool full = static_cast<int64_t>(st->rows.size()) >= kRefillRowsPerSlot * o_.generate.slots;
    if (!st->draining && (full || stop.load() || NewerReady())) st->draining = true;
    if (st->draining) return std::vector<std::vector<int64_t>>();
    const uint64_t count = std::max<uint64_t>(static_cast<uint64_t>(free), st->group_rows);
    RL_ASSIGN_OR_RETURN(queue::GetReply got, queue_.Get(GenerateGet(static_cast<uint32_t>(count), 0)));
    if (got.rows.empty()) return std::vector<std::vector<int64_t>>();
    if (NeededVersion(got) > static_cast<int64_t>(policy_->version())) {  // meant for weights on their way
      (void)queue_.Nack(kGenerateTask, got.lease, {});
      st->draining = true;
      return std::vector<std::vector<int64_t>>();
    }
    ++stats_->refills;
    return AddLease(got, config, st);
  };
}

// For Generate's on_finished: a group is put, its rows acked, when its last row is done.
model::OnFinished Loop::PutGroups(StreamState* st, uint64_t began) {
  return [this, st, began](size_t i, const model::Generation& g) -> Status {
    StreamGroup& group = st->groups[st->rows[i].group];
    RL_ASSIGN_OR_RETURN(queue::ClientRow row, ResponseRow(g, st->rows[i].index, began));
    group.put.rows.push_back(std::move(row));
    group.tokens += static_cast<int64_t>(g.response_ids.size());
    if (--group.left > 0) return Status::OK();
    // The phase stays "generate": a put here takes a fraction of a millisecond, and a phase event
    // per group would fill the timeline with slivers.
    RL_RETURN_IF_ERROR(Commit(group.put, 1, group.tokens));
    group.put.rows.clear();
    Progress(false);
    return Status::OK();
  };
}

Status Loop::StreamBatch(const queue::GetReply& got, const std::atomic<bool>& stop) {
  Phase("generate");
  RL_RETURN_IF_ERROR(CheckWeights(got));
  const model::Transformer& model = policy_->model();
  const model::ModelConfig config = model.config();
  const uint64_t began = policy_->version();
  StreamState st;
  model::GenerateOptions go = BatchOptions(got, model, began);
  go.more_prompts = MoreGroups(config, &st, stop);
  go.on_finished = PutGroups(&st, began);
  model::GenerateStats gs;
  const uint64_t refills = stats_->refills;
  const int64_t start = MonoMillis();
  Result<std::vector<std::vector<int64_t>>> prompts = AddLease(got, config, &st);
  Result<std::vector<model::Generation>> gens = prompts.status();
  if (prompts.ok()) {
    gens = o_.group != nullptr ? o_.group->Generate(model, began, *prompts, go, &gs) : model::Generate(model, *prompts, go, &gs);
  }
  double seconds = (MonoMillis() - start) / 1000.0;
  if (!gens.ok()) {  // what was not put yet goes back at once
    for (uint64_t lease : st.leases) (void)queue_.Nack(kGenerateTask, lease, {});
    // A rollout group lost mid-batch: the groups put are in the queue, the rest were given back,
    // and the leader goes on alone until the group re-forms.
    if (o_.group != nullptr && o_.group->Reforms() && gens.status().code() == Code::kUnavailable) {
      spdlog::warn("the rollout group broke during a batch ({}): its unfinished rows went back to the queue",
                   gens.status().message());
      return Status::OK();
    }
    return gens.status();
  }
  stats_->generate_s += seconds;
  CountSwitches(gs);
  const size_t layouts = EmitLayoutSwitches();
  ++stats_->batches;
  if (o_.events) {
    o_.events->Emit("batch", {{"rows", st.rows.size()}, {"groups", st.groups.size()}, {"tokens", gs.new_tokens},
                              {"seconds", seconds}, {"tokens_per_s", seconds > 0 ? gs.new_tokens / seconds : 0.0},
                              {"version", policy_->version()}, {"began", began}, {"lease", got.lease},
                              {"leases", st.leases.size()}, {"refills", stats_->refills - refills},
                              {"rounds", gs.steps}, {"prompt_tokens", st.prompt_tokens},
                              {"lengths", LengthQuartiles(*gens)},
                              {"switches", gs.switches}, {"interrupted", gs.interrupted},
                              {"reprefill_tokens", gs.reprefill_tokens}, {"switch_seconds", gs.switch_s},
                              {"layout_switches", layouts},
                              {"layout_stays", o_.group != nullptr ? o_.group->last_stays().size() : 0}});
  }
  return Status::OK();
}

}  // namespace rl::rollout::detail
