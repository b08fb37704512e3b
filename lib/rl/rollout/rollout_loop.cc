#include "rl/rollout/rollout_loop.h"

#include <algorithm>
#include <set>
#include <thread>

#include "rl/core/log.h"
#include "rl/health/progress.h"
#include "rl/queue/store.h"
#include "rl/rollout/rollout_loop_impl.h"

namespace rl::rollout {

Result<OnNewWeights> ParseOnNewWeights(const std::string& name) {
  if (name == "finish") return OnNewWeights::kFinish;
  if (name == "interrupt") return OnNewWeights::kInterrupt;
  return Status::InvalidArgument("--on-new-weights must be finish or interrupt, not '" + name + "'");
}

Status RunRollout(const RolloutOptions& options, Policy* policy, const std::atomic<bool>& stop, RolloutStats* stats) {
  RolloutStats local;
  detail::Loop loop(options, policy, stats ? stats : &local);
  return loop.Run(stop);
}

}  // namespace rl::rollout

namespace rl::rollout::detail {

using queue::GotRow;

namespace {

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

}  // namespace

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

Status Loop::Run(const std::atomic<bool>& stop) {
  if (o_.tools) {
    if (!o_.conversation) return Status::InvalidArgument("tools without conversation options");
    RL_ASSIGN_OR_RETURN(tool_tokens_, ResolveToolTokens(*o_.model, o_.conversation->format));
  }
  RL_RETURN_IF_ERROR(queue_.ReleaseEarlierLeases(kGenerateTask, o_.holder, o_.events));
  RL_RETURN_IF_ERROR(WaitForWeights(stop));
  if (o_.generate.record_routes && policy_->model().config().SparseLayerCount() == 0) {
    spdlog::warn("--record-routes: the model has no sparse (mixture-of-experts) layers; rows get no routes column");
  }
  while (!stop.load() && (o_.max_batches == 0 || stats_->batches < o_.max_batches)) {
    RL_RETURN_IF_ERROR(Refresh());
    Phase("waiting-for-data");
    auto waited = queue_.Get(GenerateGet(o_.count, o_.wait_ms));
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
      RL_RETURN_IF_ERROR(o_.tools ? ConversationBatch(got, stop) : o_.refill ? StreamBatch(got, stop) : Batch(got));
    }
    Progress(false);
  }
  Progress(true);
  return Status::OK();
}

Status Loop::WaitForWeights(const std::atomic<bool>& stop) {
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

queue::GetRequest Loop::GenerateGet(uint32_t count, int64_t wait_ms) const {
  queue::GetRequest g;
  g.task = kGenerateTask;
  g.columns = {"prompt_ids"};
  g.count = count;
  g.min = 1;
  g.groups = true;
  g.lease_ms = o_.lease_ms;
  g.wait_ms = wait_ms;
  g.holder = o_.holder;
  if (o_.tools) g.also = kProgressColumns;
  return g;
}

// The newest weight version any row of the lease asks for (its min_version), 0 when none does.
int64_t Loop::NeededVersion(const queue::GetReply& got) {
  int64_t need = 0;
  for (const GotRow& row : got.rows) {
    const Value* v = FindColumn(row.columns, "min_version");
    if (v && std::holds_alternative<int64_t>(*v)) need = std::max(need, std::get<int64_t>(*v));
  }
  return need;
}

// Rows carry the oldest weight version the trainer will take them from (column min_version,
// set by its feeder): in sync mode the version it publishes just before it feeds them. Waiting
// for it, up to a quarter of the lease, costs less than rows that would only be regenerated,
// and makes a sync run's rows a function of their prompts and weights alone (not of whether
// the weights file or the prompts arrived first).
Status Loop::WaitForVersion(const queue::GetReply& got, const std::atomic<bool>& stop) {
  const int64_t need = NeededVersion(got);
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

Status Loop::Refresh() {
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

// The prompts of a lease in row order; a row the model cannot take becomes an `error` row of
// *put instead.
Loop::Prompts Loop::Read(const queue::GetReply& got, const model::ModelConfig& config, queue::PutRequest* put) {
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

Tensor RoutesColumn(const std::vector<int32_t>& routes, const model::ModelConfig& c) {
  const int64_t s = c.SparseLayerCount(), k = c.moe.num_experts_per_tok;
  Tensor t;
  const int bytes = c.ExpertIndexBytes();
  t.dtype = bytes == 1 ? DType::kU8 : bytes == 2 ? DType::kI16 : DType::kI32;
  t.shape = {static_cast<int64_t>(routes.size()) / (s * k), s, k};
  const size_t width = DTypeSize(t.dtype);
  t.data.resize(routes.size() * width);
  for (size_t i = 0; i < routes.size(); ++i) {
    const uint32_t v = static_cast<uint32_t>(routes[i]);
    for (size_t b = 0; b < width; ++b) t.data[i * width + b] = static_cast<char>((v >> (8 * b)) & 0xff);  // little-endian
  }
  return t;
}

// `began`: the version the batch began with. With interrupt, a row's version is the oldest of
// its tokens' (rollout_loop.h), and token_versions has each token's.
Status Loop::AddResponses(const std::vector<model::Generation>& gens, const Prompts& p, uint64_t began,
                        queue::PutRequest* put) {
  for (size_t i = 0; i < gens.size(); ++i) {
    RL_ASSIGN_OR_RETURN(queue::ClientRow row, ResponseRow(gens[i], p.indices[i], began));
    put->rows.push_back(std::move(row));
  }
  return Status::OK();
}

// The columns a generated row gets.
Result<queue::ClientRow> Loop::ResponseRow(const model::Generation& g, uint64_t index, uint64_t began) const {
  RL_ASSIGN_OR_RETURN(std::string text, o_.model->tokenizer->Decode(g.response_ids));
  const int64_t oldest = g.versions.empty() ? static_cast<int64_t>(began)
                                            : *std::min_element(g.versions.begin(), g.versions.end());
  queue::ClientRow row{index,
                       {{"response_ids", Tensor::FromI64(g.response_ids)},
                        {"response", std::move(text)},
                        {"logprobs", Tensor::FromF32(g.logprobs)},
                        {"version", oldest}}};
  if (interrupt()) row.columns.push_back({"token_versions", Tensor::FromI64(g.versions)});
  if (!g.routes.empty()) row.columns.push_back({"routes", RoutesColumn(g.routes, policy_->model().config())});
  return row;
}

// For Generate (generate.h): the policy's new weights when a new version came in since the last
// look. Weights files are looked for at most every kInterruptLookMs; a UCX arrival costs a lock.
model::NewerWeights Loop::NewerWeights() {
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

void Loop::CountSwitches(const model::GenerateStats& gs) {
  stats_->switches += static_cast<uint64_t>(gs.switches);
  stats_->interrupted += static_cast<uint64_t>(gs.interrupted);
  stats_->reprefill_tokens += static_cast<uint64_t>(gs.reprefill_tokens);
  stats_->switch_s += gs.switch_s;
}

size_t Loop::EmitLayoutSwitches() {
  if (o_.group == nullptr) return 0;
  const std::vector<dist::SwitchRecord>& switches = o_.group->last_switches();
  for (const dist::SwitchRecord& s : switches) {
    if (o_.events == nullptr) break;
    o_.events->Emit("layout", {{"from", s.from}, {"to", s.to}, {"round", s.round}, {"at", s.began_ts}, {"sequences", s.sequences},
                               {"recompute", s.recompute}, {"seconds", s.total_s()},
                               {"predicted_s", s.predicted.total_s()}, {"stay_s", s.predicted.stay_s}});
  }
  for (const dist::StayRecord& s : o_.group->last_stays()) {
    if (o_.events == nullptr) break;
    o_.events->Emit("layout_stay", {{"tp", s.tp}, {"to", s.to}, {"round", s.round}, {"at", s.ts},
                                    {"sequences", s.sequences}, {"added", s.added},
                                    {"predicted_s", s.predicted.total_s()}, {"stay_s", s.predicted.stay_s}});
  }
  return switches.size();
}

// Weights of another vocabulary end the batch: its rows are given back and the error returned.
Status Loop::CheckWeights(const queue::GetReply& got) {
  Status s = WeightsFitTheVocabulary();
  if (!s.ok()) (void)queue_.Nack(kGenerateTask, got.lease, {});
  return s;
}

Status Loop::WeightsFitTheVocabulary() const {
  return model::CheckVocabulary(policy_->model(), *o_.model, "weights version " + std::to_string(policy_->version()));
}

// A batch's generation options: the model dir's eos, a seed of the lease's first row.
model::GenerateOptions Loop::BatchOptions(const queue::GetReply& got, const model::Transformer& model, uint64_t began) {
  model::GenerateOptions go = o_.generate;
  go.eos_id = o_.model->eos_id;
  if (go.max_new_tokens <= 0) go.max_new_tokens = model.config().context();
  go.seed = o_.generate.seed ^ (0x9e3779b97f4a7c15ULL * (got.rows.front().index + 1));
  go.version = static_cast<int64_t>(began);
  if (interrupt()) go.newer_weights = NewerWeights();
  return go;
}

Status Loop::Batch(const queue::GetReply& got) {
  Phase("generate");
  RL_RETURN_IF_ERROR(CheckWeights(got));
  const model::Transformer& model = policy_->model();
  queue::PutRequest put;
  put.ack_task = kGenerateTask;
  put.ack_lease = got.lease;
  Prompts prompts = Read(got, model.config(), &put);
  const uint64_t began = policy_->version();
  model::GenerateOptions go = BatchOptions(got, model, began);
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
  const size_t layouts = EmitLayoutSwitches();
  ++stats_->batches;
  if (o_.events) {
    o_.events->Emit("batch", {{"rows", got.rows.size()}, {"groups", prompts.groups}, {"tokens", gs.new_tokens},
                              {"seconds", seconds}, {"tokens_per_s", seconds > 0 ? gs.new_tokens / seconds : 0.0},
                              {"version", policy_->version()}, {"began", began}, {"lease", got.lease},
                              {"rounds", gs.steps}, {"prompt_tokens", PromptTokens(prompts.ids)},
                              {"lengths", LengthQuartiles(*gens)}, {"switches", gs.switches},
                              {"layout_switches", layouts},
                              {"interrupted", gs.interrupted}, {"reprefill_tokens", gs.reprefill_tokens},
                              {"switch_seconds", gs.switch_s}});
  }
  return Status::OK();
}

Status Loop::Commit(const queue::PutRequest& put, size_t groups, int64_t tokens) {
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

void Loop::Phase(const std::string& phase) {
  if (o_.events) o_.events->EnterPhase(phase);
}

void Loop::Progress(bool final) {
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

std::string Loop::Lost() const {
  return stats_->lost ? ", " + std::to_string(stats_->lost) + " rows lost to leases that ended (expired or given back)" : "";
}

}  // namespace rl::rollout::detail
