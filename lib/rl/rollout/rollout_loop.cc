#include "rl/rollout/rollout_loop.h"

#include <algorithm>
#include <set>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/health/progress.h"
#include "rl/queue/store.h"
#include "rl/queue/watched_queue.h"

namespace rl::rollout {
namespace {

using queue::GotRow;

// The row's prompt ids, or why the model cannot take them.
Result<std::vector<int64_t>> PromptIds(const GotRow& row, const model::ModelConfig& config) {
  const Value* v = FindColumn(row.columns, "prompt_ids");
  const Tensor* t = v ? std::get_if<Tensor>(v) : nullptr;
  if (t == nullptr || t->shape.size() != 1 || !(t->dtype == DType::kI64 || t->dtype == DType::kI32)) {
    return Status::DataError("prompt_ids is not a 1-D integer tensor");
  }
  std::vector<int64_t> ids = t->ToI64();
  if (ids.empty()) return Status::DataError("prompt_ids is empty");
  if (static_cast<int64_t>(ids.size()) >= config.context()) {
    return Status::DataError("prompt_ids leaves no room in the context of " + std::to_string(config.context()));
  }
  for (int64_t id : ids) {
    if (id < 0 || id >= config.vocab_size) return Status::DataError("prompt_ids holds " + std::to_string(id) + ", outside the vocabulary");
  }
  return ids;
}

// The group a row counts in: the queue's key of its group column (queue::GroupKey, as rl-queue
// and rl-train know groups by), or a group of its own when it has none. Only counted, never
// stored or sent.
std::string GroupOf(const GotRow& row) {
  const Value* g = FindColumn(row.columns, queue::kGroupColumn);
  std::string key = g ? queue::GroupKey(*g) : "";
  return key.empty() ? "row " + std::to_string(row.index) : key;
}

size_t PromptTokens(const std::vector<std::vector<int64_t>>& ids) {
  size_t n = 0;
  for (const auto& p : ids) n += p.size();
  return n;
}

// Response lengths of a batch as [min, 25%, median, 75%, max] (nearest rank): what rl-profile plan
// draws the lengths of simulated batches from.
std::vector<size_t> LengthQuartiles(const std::vector<model::Generation>& gens) {
  std::vector<size_t> len;
  for (const model::Generation& g : gens) len.push_back(g.response_ids.size());
  if (len.empty()) return {};
  std::sort(len.begin(), len.end());
  std::vector<size_t> q;
  for (int i = 0; i <= 4; ++i) q.push_back(len[(len.size() - 1) * static_cast<size_t>(i) / 4]);
  return q;
}

}  // namespace

Result<OnNewWeights> ParseOnNewWeights(const std::string& name) {
  if (name == "finish") return OnNewWeights::kFinish;
  if (name == "interrupt") return OnNewWeights::kInterrupt;
  return Status::InvalidArgument("--on-new-weights must be finish or interrupt, not '" + name + "'");
}

namespace {

class Loop {
 public:
  Loop(const RolloutOptions& o, Policy* policy, RolloutStats* stats)
      : o_(o), policy_(policy), client_(o.client), stats_(stats) {}

  Status Run(const std::atomic<bool>& stop) {
    if (o_.tools) {
      if (!o_.conversation) return Status::InvalidArgument("tools without conversation options");
      RL_ASSIGN_OR_RETURN(tool_tokens_, ResolveToolTokens(*o_.model, o_.conversation->format));
    }
    RL_RETURN_IF_ERROR(queue_.ReleaseEarlierLeases(kGenerateTask, o_.holder, o_.events));
    RL_RETURN_IF_ERROR(WaitForWeights(stop));
    while (!stop.load() && (o_.max_batches == 0 || stats_->batches < o_.max_batches)) {
      RL_RETURN_IF_ERROR(Refresh());
      Phase("waiting-for-data");
      queue::GetRequest g;
      g.task = kGenerateTask;
      g.columns = {"prompt_ids"};
      g.count = o_.count;
      g.min = 1;
      g.groups = true;
      g.lease_ms = o_.lease_ms;
      g.wait_ms = o_.wait_ms;
      g.holder = o_.holder;
      if (o_.tools) g.also = kProgressColumns;
      auto waited = queue_.Get(g);
      if (!waited.ok() && stop.load()) {  // stopped while waiting (ClientOptions::stop)
        queue_.GiveUpWaitingGet(kGenerateTask, o_.holder);
        break;
      }
      RL_RETURN_IF_ERROR(waited.status());
      queue::GetReply& got = *waited;
      if (!got.rows.empty() && stop.load()) {
        auto n = queue_.Nack(kGenerateTask, got.lease, {});
        spdlog::info("stopping: gave back {} rows", n.ok() ? n->done.size() : 0);
        break;
      }
      if (!got.rows.empty()) {
        // The trainer publishes a version and then feeds the prompts meant for it, so a get
        // that waited may return rows the newest weights should answer: look again (cheap
        // when there is nothing new), or sync mode regenerates every batch once.
        RL_RETURN_IF_ERROR(Refresh());
        RL_RETURN_IF_ERROR(WaitForVersion(got, stop));
        RL_RETURN_IF_ERROR(o_.tools ? ConversationBatch(got, stop) : Batch(got));
      }
      Progress(false);
    }
    Progress(true);
    return Status::OK();
  }

 private:
  Status WaitForWeights(const std::atomic<bool>& stop) {
    if (policy_->loaded()) return Status::OK();
    if (o_.checkpoint_dir.empty() && !o_.weights) {
      return Status::InvalidArgument("no weights: give --weights, --checkpoint-dir or --weights-from");
    }
    bool said = false;
    while (!stop.load()) {
      RL_RETURN_IF_ERROR(Refresh());
      if (policy_->loaded()) return Status::OK();
      if (!said) spdlog::info("waiting for a first weight version{}", o_.weights ? "" : " in " + o_.checkpoint_dir);
      said = true;
      Phase("waiting-for-weights");
      std::this_thread::sleep_for(std::chrono::milliseconds(o_.weights ? 50 : 500));
    }
    return Status::OK();
  }

  // Rows carry the oldest weight version the trainer will take them from (column min_version,
  // set by its feeder): in sync mode the version it publishes just before it feeds them. Waiting
  // for it, up to a quarter of the lease, costs less than rows that would only be regenerated,
  // and makes a sync run's rows a function of their prompts and weights alone (not of whether
  // the weights file or the prompts arrived first).
  Status WaitForVersion(const queue::GetReply& got, const std::atomic<bool>& stop) {
    int64_t need = 0;
    for (const GotRow& row : got.rows) {
      const Value* v = FindColumn(row.columns, "min_version");
      if (v && std::holds_alternative<int64_t>(*v)) need = std::max(need, std::get<int64_t>(*v));
    }
    const int64_t deadline = MonoMillis() + o_.lease_ms / 4;
    bool waited = false;
    while (static_cast<int64_t>(policy_->version()) < need && MonoMillis() < deadline && !stop.load()) {
      if (!waited) Phase("waiting-for-weights");
      waited = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      RL_RETURN_IF_ERROR(Refresh());
    }
    if (static_cast<int64_t>(policy_->version()) < need) {
      spdlog::warn("rows want weights version {} or newer; generating with version {} (the trainer will regenerate "
                   "them if it needs to)", need, policy_->version());
    }
    return Status::OK();
  }

  Status Refresh() {
    int64_t start = MonoMillis();
    uint64_t before = policy_->version();
    if (o_.weights && (o_.weights->SwitchIfNewer(policy_) || !o_.weights->InFallback())) return Status::OK();
    RL_ASSIGN_OR_RETURN(std::optional<WeightsFile> file, policy_->Newer(o_.checkpoint_dir));
    if (!file) return Status::OK();
    Phase("loading-weights");
    if (!policy_->Switch(*file)) return Status::OK();
    health::Progress().version = static_cast<int64_t>(policy_->version());
    double s = (MonoMillis() - start) / 1000.0;
    spdlog::info("weights version {} loaded from {} in {:.2f} s (was {})", policy_->version(), policy_->path(), s, before);
    if (o_.events) {
      o_.events->Emit("weights", {{"version", policy_->version()}, {"via", "file"}, {"path", policy_->path()}, {"seconds", s}});
    }
    return Status::OK();
  }

  struct Prompts {
    std::vector<std::vector<int64_t>> ids;
    std::vector<uint64_t> indices;  // the row of each prompt
    size_t groups = 0;
  };

  // The prompts of a lease in row order; a row the model cannot take becomes an `error` row of
  // *put instead.
  Prompts Read(const queue::GetReply& got, const model::ModelConfig& config, queue::PutRequest* put) {
    Prompts p;
    std::set<std::string> groups;
    for (const GotRow& row : got.rows) {
      groups.insert(GroupOf(row));
      Result<std::vector<int64_t>> ids = PromptIds(row, config);
      if (!ids.ok()) {
        spdlog::error("row {}: {}", row.index, ids.status().message());
        put->rows.push_back({row.index, {{"error", ids.status().message()}}});
        ++stats_->bad_rows;
        continue;
      }
      p.ids.push_back(std::move(*ids));
      p.indices.push_back(row.index);
    }
    p.groups = groups.size();
    return p;
  }

  // `began`: the version the batch began with. With interrupt, a row's version is the oldest of
  // its tokens' (rollout_loop.h), and token_versions has each token's.
  Status AddResponses(const std::vector<model::Generation>& gens, const Prompts& p, uint64_t began,
                      queue::PutRequest* put) {
    for (size_t i = 0; i < gens.size(); ++i) {
      const model::Generation& g = gens[i];
      RL_ASSIGN_OR_RETURN(std::string text, o_.model->tokenizer->Decode(g.response_ids));
      const int64_t oldest = g.versions.empty() ? static_cast<int64_t>(began)
                                                : *std::min_element(g.versions.begin(), g.versions.end());
      queue::ClientRow row{p.indices[i],
                           {{"response_ids", Tensor::FromI64(g.response_ids)},
                            {"response", std::move(text)},
                            {"logprobs", Tensor::FromF32(g.logprobs)},
                            {"version", oldest}}};
      if (interrupt()) row.columns.push_back({"token_versions", Tensor::FromI64(g.versions)});
      put->rows.push_back(std::move(row));
    }
    return Status::OK();
  }

  bool interrupt() const { return o_.on_new_weights == OnNewWeights::kInterrupt && o_.group == nullptr; }

  // For Generate (generate.h): the policy's new weights when a new version came in since the last
  // look. Weights files are looked for at most every kInterruptLookMs; a UCX arrival costs a lock.
  model::NewerWeights NewerWeights() {
    return [this]() -> Result<std::optional<model::WeightSwitch>> {
      const int64_t now = MonoMillis();
      const bool files = !o_.weights || o_.weights->InFallback();
      if (files && now - last_look_ms_ < kInterruptLookMs) return std::optional<model::WeightSwitch>();
      last_look_ms_ = now;
      const uint64_t before = policy_->version();
      RL_RETURN_IF_ERROR(Refresh());
      Phase("generate");  // Refresh may have entered loading-weights
      if (policy_->version() == before) return std::optional<model::WeightSwitch>();
      // As at a batch boundary: weights of another vocabulary end the batch (rows given back, exit 78).
      RL_RETURN_IF_ERROR(model::CheckVocabulary(policy_->model(), *o_.model,
                                                "weights version " + std::to_string(policy_->version())));
      if (o_.events) o_.events->Emit("interrupt", {{"from", before}, {"version", policy_->version()}});
      return std::optional<model::WeightSwitch>(
          model::WeightSwitch{&policy_->model(), static_cast<int64_t>(policy_->version())});
    };
  }

  void CountSwitches(const model::GenerateStats& gs) {
    stats_->switches += static_cast<uint64_t>(gs.switches);
    stats_->interrupted += static_cast<uint64_t>(gs.interrupted);
    stats_->reprefill_tokens += static_cast<uint64_t>(gs.reprefill_tokens);
    stats_->switch_s += gs.switch_s;
  }

  Status Batch(const queue::GetReply& got) {
    Phase("generate");
    const model::Transformer& model = policy_->model();
    if (Status s = model::CheckVocabulary(model, *o_.model, "weights version " + std::to_string(policy_->version()));
        !s.ok()) {
      (void)queue_.Nack(kGenerateTask, got.lease, {});
      return s;
    }
    queue::PutRequest put;
    put.ack_task = kGenerateTask;
    put.ack_lease = got.lease;
    Prompts prompts = Read(got, model.config(), &put);
    model::GenerateOptions go = o_.generate;
    go.eos_id = o_.model->eos_id;
    if (go.max_new_tokens <= 0) go.max_new_tokens = model.config().context();
    go.seed = o_.generate.seed ^ (0x9e3779b97f4a7c15ULL * (got.rows.front().index + 1));
    const uint64_t began = policy_->version();
    go.version = static_cast<int64_t>(began);
    if (interrupt()) go.newer_weights = NewerWeights();
    model::GenerateStats gs;
    int64_t start = MonoMillis();
    Result<std::vector<model::Generation>> gens =
        o_.group != nullptr ? o_.group->Generate(model, policy_->version(), prompts.ids, go, &gs)
                            : model::Generate(model, prompts.ids, go, &gs);
    double seconds = (MonoMillis() - start) / 1000.0;
    Status s = gens.ok() ? AddResponses(*gens, prompts, began, &put) : gens.status();
    if (!s.ok()) {
      (void)queue_.Nack(kGenerateTask, got.lease, {});  // give the rows back at once, then fail
      return s;
    }
    Phase("write");
    RL_RETURN_IF_ERROR(Commit(put, prompts.groups, gs.new_tokens));
    stats_->generate_s += seconds;
    CountSwitches(gs);
    ++stats_->batches;
    if (o_.events) {
      o_.events->Emit("batch", {{"rows", got.rows.size()}, {"groups", prompts.groups}, {"tokens", gs.new_tokens},
                                {"seconds", seconds}, {"tokens_per_s", seconds > 0 ? gs.new_tokens / seconds : 0.0},
                                {"version", policy_->version()}, {"began", began}, {"lease", got.lease},
                                {"rounds", gs.steps}, {"prompt_tokens", PromptTokens(prompts.ids)},
                                {"lengths", LengthQuartiles(*gens)}, {"switches", gs.switches},
                                {"interrupted", gs.interrupted}, {"reprefill_tokens", gs.reprefill_tokens},
                                {"switch_seconds", gs.switch_s}});
    }
    return Status::OK();
  }

  // Multi-turn rows (rollout_loop.h): turns until every conversation of the lease is done, its
  // progress written after each; then one put that acks them all.
  Status ConversationBatch(const queue::GetReply& got, const std::atomic<bool>& stop) {
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
        return o_.group->Generate(model, version, p, go, gs);
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
  Result<bool> WriteProgress(const queue::GetReply& got, const Prompts& prompts,
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

  Status AddConversation(const ConversationRunner& runner, const Conversation& c, uint64_t index,
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

  Status Commit(const queue::PutRequest& put, size_t groups, int64_t tokens) {
    auto done = queue_.Put(put);
    if (done.ok()) {
      stats_->rows += put.rows.size();
      stats_->groups += groups;
      stats_->tokens += static_cast<uint64_t>(tokens);
      health::Progress().rows += put.rows.size();
      health::Progress().tokens += static_cast<uint64_t>(tokens);
      return Status::OK();
    }
    if (done.status().code() != Code::kConflict && done.status().code() != Code::kNotFound) return done.status();
    spdlog::warn("{} generated rows not written: {}", put.rows.size(), done.status().message());
    if (o_.events) o_.events->Emit("lease_lost", {{"rows", put.rows.size()}, {"error", done.status().ToString()}});
    stats_->lost += put.rows.size();
    return Status::OK();
  }

  void Phase(const std::string& phase) {
    if (o_.events) o_.events->EnterPhase(phase);
  }

  void Progress(bool final) {
    int64_t now = MonoMillis();
    if (final) {
      double wall_s = (now - start_ms_) / 1000.0;
      spdlog::info("stopped at version {}: {} groups, {} rows, {} tokens; {:.0f} tokens/s while generating, "
                   "{:.0f} tokens/s over {:.1f} s{}",
                   policy_->version(), stats_->groups, stats_->rows, stats_->tokens,
                   stats_->generate_s > 0 ? stats_->tokens / stats_->generate_s : 0.0,
                   wall_s > 0 ? stats_->tokens / wall_s : 0.0, wall_s, Lost());
      if (stats_->switches > 0) {
        spdlog::info("{} weight switches mid-generation: {} sequences continued under newer weights, {} tokens "
                     "prefilled again in {:.2f} s", stats_->switches, stats_->interrupted, stats_->reprefill_tokens,
                     stats_->switch_s);
      }
      return;
    }
    if (o_.progress_ms <= 0 || now - last_.at_ms < o_.progress_ms || stats_->rows == last_.rows) return;
    double gen_s = stats_->generate_s - last_.generate_s;
    double wall_s = (now - last_.at_ms) / 1000.0;
    uint64_t tokens = stats_->tokens - last_.tokens;
    spdlog::info("version {}: {} groups, {} rows done; {:.0f} tokens/s while generating, {:.0f} tokens/s overall, "
                 "{:.0f}% of the time generating{}",
                 policy_->version(), stats_->groups, stats_->rows, gen_s > 0 ? tokens / gen_s : 0.0,
                 wall_s > 0 ? tokens / wall_s : 0.0, wall_s > 0 ? 100 * gen_s / wall_s : 0.0, Lost());
    last_ = {now, stats_->rows, stats_->tokens, stats_->generate_s};
  }

  std::string Lost() const {
    return stats_->lost ? ", " + std::to_string(stats_->lost) + " rows lost to expired leases" : "";
  }

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

}  // namespace

Status RunRollout(const RolloutOptions& options, Policy* policy, const std::atomic<bool>& stop, RolloutStats* stats) {
  RolloutStats local;
  Loop loop(options, policy, stats ? stats : &local);
  return loop.Run(stop);
}

}  // namespace rl::rollout
