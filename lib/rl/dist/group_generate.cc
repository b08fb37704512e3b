#include "rl/dist/group_generate.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "rl/dist/adaptive_generate.h"
#include "rl/model/torch_guard.h"

namespace rl::dist {
namespace {

using model::TorchGuard;

// The request header, int64 fields broadcast from the leader.
enum Field : int64_t {
  kKind,        // 0 stop, 1 generate
  kPrompts,     // n
  kTokens,      // the prompts' tokens in all
  kWeights,     // 1: every parameter follows
  kMaxNew,
  kSeed,        // bit pattern of the uint64 seed
  kSlots,
  kEos,
  kStops,       // stop ids that follow
  kEach,        // 1: per-prompt budgets follow
  kTopK,
  kDType,       // the leader's model dtype (model::DType)
  kCheckEvery,  // the leader's adaptive check interval and margin (in millionths): every rank
  kMarginPpm,   // must decide alike
  kGpu,         // 1: the leader's model is on a GPU (every rank's must be: their collectives meet there)
  kShape,       // ShapeOf the leader's model: a follower's must match, or the weights would not fit
  kRefill,      // 1: the leader takes more prompts during the batch (AdaptiveOptions::refill)
  kRoutes,      // 1: record routes (GenerateOptions::record_routes): every rank shares finished ones alike
  kFields
};
constexpr int64_t kStop = 0, kGenerate = 1;

// FNV-1a over every parameter's name and sizes: two models whose weights can be exchanged match.
int64_t ShapeOf(const model::Transformer& model) {
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const std::string& s) {
    for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  };
  for (const auto& [name, t] : model.NamedParameters()) {
    mix(name);
    for (int64_t d : t.sizes()) mix(":" + std::to_string(d));
    mix(";");
  }
  int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

Status SendOrReceiveWeights(Group& group, const model::Transformer& model) {
  return TorchGuard("rollout group: weights", [&]() -> Status {
    c10::NoGradGuard no_grad;
    // On the model's device (every rank's is a GPU, or none is), GPU to GPU through NCCL where the
    // group has it. In the model's dtype through NCCL; otherwise as float32 whatever the model's
    // dtype: c10d's Gloo does not take bfloat16, and the round trip through float32 is exact.
    for (auto& [name, t] : model.NamedParameters()) {
      const at::ScalarType type = t.is_cuda() && group.OnNccl() ? t.scalar_type() : at::kFloat;
      at::Tensor buf = group.rank() == 0 ? t.to(type).contiguous() : at::empty(t.sizes(), t.options().dtype(type));
      RL_RETURN_IF_ERROR(group.Broadcast(buf, 0));
      if (group.rank() != 0) t.copy_(buf);
    }
    return Status::OK();
  });
}

// Both sides of a request after the header: the leader fills the tensors and sends them, a
// follower receives them into tensors shaped by the header.
struct Request {
  at::Tensor header = at::zeros({kFields}, at::kLong);
  at::Tensor sampling = at::zeros({2}, at::kDouble);  // temperature, top_p
  at::Tensor lengths, tokens, each, stops;
};

Status ExchangeBody(Group& group, Request* r) {
  const int64_t* h = r->header.data_ptr<int64_t>();
  if (group.rank() != 0) {
    r->lengths = at::zeros({h[kPrompts]}, at::kLong);
    r->tokens = at::zeros({h[kTokens]}, at::kLong);
    r->each = at::zeros({h[kEach] ? h[kPrompts] : 0}, at::kLong);
    r->stops = at::zeros({h[kStops]}, at::kLong);
  }
  RL_RETURN_IF_ERROR(group.Broadcast(r->sampling, 0));
  RL_RETURN_IF_ERROR(group.Broadcast(r->lengths, 0));
  RL_RETURN_IF_ERROR(group.Broadcast(r->tokens, 0));
  if (r->each.numel() > 0) RL_RETURN_IF_ERROR(group.Broadcast(r->each, 0));
  if (r->stops.numel() > 0) RL_RETURN_IF_ERROR(group.Broadcast(r->stops, 0));
  return Status::OK();
}

// The leader's go carries its more_prompts and on_finished; a follower's has none but `refill`
// from the header.
Result<AdaptiveResult> RunOnGroup(Group& group, const model::Transformer& model,
                                  const std::vector<std::vector<int64_t>>& prompts, const model::GenerateOptions& go,
                                  const GroupGenerateOptions& options, bool refill) {
  AdaptiveOptions a;
  a.generate = go;
  a.refill = refill;
  a.adaptive = options.predictor != nullptr;
  a.start_tp = a.adaptive ? 1 : group.size();
  a.predictor = options.predictor;
  a.calibration = options.calibration;
  a.check_every = options.check_every;
  a.margin = options.margin;
  // The leader's slots are the group's: each of the N replicas (or the N ranks' one) takes a share.
  a.generate.slots = std::max<int64_t>(1, go.slots / group.size());
  // Abandoned (a follower's: the leader returned its error): the group waits for the next request.
  return AdaptiveGenerate(group, model, prompts, a);
}

}  // namespace

Result<std::vector<model::Generation>> GroupLeader::Generate(const model::Transformer& model, uint64_t version,
                                                             const std::vector<std::vector<int64_t>>& prompts,
                                                             const model::GenerateOptions& go,
                                                             model::GenerateStats* stats) {
  RL_RETURN_IF_ERROR(model::CheckGenerateRequest(model.config(), prompts, go));
  switches_.clear();
  stays_.clear();
  if (host_ != nullptr) {
    RL_ASSIGN_OR_RETURN(bool formed, host_->Poll());
    if (formed) sent_any_ = false;  // the new group's followers hold no weights yet
    group_ = host_->group();
  }
  Result<AdaptiveResult> out = Status::Unavailable("rollout group: no group");
  if (group_ != nullptr) {
    out = OnGroup(model, version, prompts, go);
    if (!out.ok() && host_ != nullptr && out.status().code() == Code::kUnavailable) {
      host_->Drop(out.status().message());
      group_ = nullptr;
      // Streaming, some responses were handed out already: generating the batch again alone
      // would hand them out twice. The caller gives the rest back; the next batch goes alone.
      if (go.more_prompts) return out.status();
    }
  }
  if (group_ == nullptr && host_ != nullptr) {  // the leader holds the whole model: alone
    return model::Generate(model, prompts, go, stats);
  }
  if (!out.ok()) return out.status();
  switches_ = out->switches;
  stays_ = out->stays;
  if (stats != nullptr) {
    *stats = model::GenerateStats{};
    for (const auto& g : out->generations) stats->new_tokens += static_cast<int64_t>(g.response_ids.size());
    stats->steps = static_cast<int64_t>(out->trace.size());  // the rounds of rank 0's replica
  }
  return std::move(out->generations);
}

Result<AdaptiveResult> GroupLeader::OnGroup(const model::Transformer& model, uint64_t version,
                                            const std::vector<std::vector<int64_t>>& prompts,
                                            const model::GenerateOptions& go) {
  Request r;
  const bool weights = !sent_any_ || sent_version_ != version;
  RL_RETURN_IF_ERROR(TorchGuard("rollout group: request", [&]() -> Status {
    std::vector<int64_t> lengths, flat;
    for (const auto& p : prompts) {
      lengths.push_back(static_cast<int64_t>(p.size()));
      flat.insert(flat.end(), p.begin(), p.end());
    }
    int64_t* h = r.header.data_ptr<int64_t>();
    h[kKind] = kGenerate;
    h[kPrompts] = static_cast<int64_t>(prompts.size());
    h[kTokens] = static_cast<int64_t>(flat.size());
    h[kWeights] = weights ? 1 : 0;
    h[kMaxNew] = go.max_new_tokens;
    std::memcpy(&h[kSeed], &go.seed, sizeof go.seed);
    h[kSlots] = go.slots;
    h[kEos] = go.eos_id;
    h[kStops] = static_cast<int64_t>(go.stop_ids.size());
    h[kEach] = go.max_new_tokens_each.empty() ? 0 : 1;
    h[kTopK] = go.sampling.top_k;
    h[kDType] = static_cast<int64_t>(model.dtype());
    h[kCheckEvery] = options_.check_every;
    h[kMarginPpm] = std::llround(options_.margin * 1e6);
    h[kGpu] = model.device().is_cuda() ? 1 : 0;
    h[kShape] = ShapeOf(model);
    h[kRefill] = go.more_prompts ? 1 : 0;
    h[kRoutes] = go.record_routes ? 1 : 0;
    r.sampling[0] = go.sampling.temperature;
    r.sampling[1] = go.sampling.top_p;
    r.lengths = at::tensor(lengths, at::kLong);
    r.tokens = at::tensor(flat, at::kLong);
    r.each = at::tensor(go.max_new_tokens_each, at::kLong);
    r.stops = at::tensor(go.stop_ids, at::kLong);
    return Status::OK();
  }));
  // The followers wait for the header on the idle channel (they may wait long): so must it go.
  RL_RETURN_IF_ERROR(group_->Broadcast(r.header, 0, options_.idle_timeout_ms));
  RL_RETURN_IF_ERROR(ExchangeBody(*group_, &r));
  if (weights) {
    RL_RETURN_IF_ERROR(SendOrReceiveWeights(*group_, model));
    sent_any_ = true;
    sent_version_ = version;
  }
  return RunOnGroup(*group_, model, prompts, go, options_, go.more_prompts != nullptr);
}

Status GroupLeader::Stop() {
  Status s = Status::OK();
  if (host_ != nullptr) group_ = host_->group();
  if (group_ != nullptr) {
    at::Tensor header = at::zeros({kFields}, at::kLong);
    header[kKind] = kStop;
    s = group_->Broadcast(header, 0, options_.idle_timeout_ms);
  }
  if (host_ != nullptr) host_->Stop();  // and the followers waiting outside a group
  return s;
}

Status RunGroupFollower(Group& group, model::Transformer& whole, const GroupGenerateOptions& options) {
  for (;;) {
    Request r;
    RL_RETURN_IF_ERROR(group.Broadcast(r.header, 0, options.idle_timeout_ms));
    const int64_t* h = r.header.data_ptr<int64_t>();
    if (h[kKind] == kStop) return Status::OK();
    if (h[kKind] != kGenerate || h[kPrompts] < 0 || h[kTokens] < 0 || h[kStops] < 0 ||
        h[kDType] < static_cast<int64_t>(model::DType::kF32) || h[kDType] > static_cast<int64_t>(model::DType::kF16) ||
        h[kCheckEvery] < 1 || h[kMarginPpm] < 0 || (h[kGpu] != 0 && h[kGpu] != 1) ||
        (h[kRefill] != 0 && h[kRefill] != 1) || (h[kRoutes] != 0 && h[kRoutes] != 1)) {
      return Status::Protocol("rollout group: a request the follower cannot read");
    }
    if ((h[kGpu] == 1) != whole.device().is_cuda()) {  // their collectives would never meet
      return Status::InvalidArgument(std::string("rollout group: the leader computes on ") +
                                     (h[kGpu] ? "a GPU" : "the CPU") + " and this rank on " +
                                     (h[kGpu] ? "the CPU" : "a GPU") + ": give every rank the same kind of --device");
    }
    if (h[kShape] != ShapeOf(whole)) {  // the weights would not fit: the broadcasts would never pair up
      return Status::InvalidArgument("rollout group: the leader's model has other parameters or shapes than this "
                                     "rank's (give every rank the same --model)");
    }
    RL_RETURN_IF_ERROR(ExchangeBody(group, &r));
    // The leader's weights may come in another dtype than the follower started with (a bf16 file):
    // compute in the leader's, which weights always accompany.
    const auto dtype = static_cast<model::DType>(h[kDType]);
    if (whole.dtype() != dtype) {
      if (!h[kWeights]) return Status::Protocol("rollout group: a new dtype without weights");
      RL_RETURN_IF_ERROR(whole.ToDType(dtype));
    }
    if (h[kWeights]) RL_RETURN_IF_ERROR(SendOrReceiveWeights(group, whole));
    model::GenerateOptions go;
    go.max_new_tokens = h[kMaxNew];
    std::memcpy(&go.seed, &h[kSeed], sizeof go.seed);
    go.slots = h[kSlots];
    go.eos_id = h[kEos];
    go.record_routes = h[kRoutes] == 1;
    go.sampling.top_k = h[kTopK];
    go.sampling.temperature = r.sampling[0].item<double>();
    go.sampling.top_p = r.sampling[1].item<double>();
    const int64_t* stop = r.stops.data_ptr<int64_t>();
    go.stop_ids.assign(stop, stop + r.stops.numel());
    const int64_t* each = r.each.data_ptr<int64_t>();
    go.max_new_tokens_each.assign(each, each + r.each.numel());
    std::vector<std::vector<int64_t>> prompts;
    const int64_t* len = r.lengths.data_ptr<int64_t>();
    const int64_t* tok = r.tokens.data_ptr<int64_t>();
    int64_t at = 0;
    for (int64_t i = 0; i < h[kPrompts]; ++i) {
      if (len[i] < 0 || at + len[i] > h[kTokens]) return Status::Protocol("rollout group: prompt lengths overrun");
      prompts.emplace_back(tok + at, tok + at + len[i]);
      at += len[i];
    }
    GroupGenerateOptions leaders = options;
    leaders.check_every = static_cast<int>(std::min<int64_t>(h[kCheckEvery], 1 << 16));
    leaders.margin = static_cast<double>(h[kMarginPpm]) / 1e6;
    RL_ASSIGN_OR_RETURN(auto out, RunOnGroup(group, whole, prompts, go, leaders, h[kRefill] == 1));
    (void)out;  // the leader writes the responses
  }
}

}  // namespace rl::dist
