#include "rl/model/generate.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>

#include "rl/model/decoder.h"
#include "rl/model/torch_guard.h"

namespace rl::model {

namespace {

Status CheckPrompt(const ModelConfig& c, const std::vector<int64_t>& prompt, const std::string& which) {
  if (prompt.empty()) return Status::InvalidArgument(which + " is empty");
  if (static_cast<int64_t>(prompt.size()) >= c.context()) {
    return Status::InvalidArgument(which + " leaves no room in the context of " + std::to_string(c.context()));
  }
  for (int64_t id : prompt) {
    if (id < 0 || id >= c.vocab_size) {
      return Status::InvalidArgument(which + " holds id " + std::to_string(id) + " outside the vocabulary");
    }
  }
  return Status::OK();
}

}  // namespace

Status CheckGenerateRequest(const ModelConfig& c, const std::vector<std::vector<int64_t>>& prompts,
                            const GenerateOptions& o) {
  RL_RETURN_IF_ERROR(o.sampling.Validate());
  if (o.max_new_tokens < 0) return Status::InvalidArgument("generate: max_new_tokens < 0");
  if (o.slots < 1) return Status::InvalidArgument("generate: slots must be >= 1");
  if (o.eos_id < -1 || o.eos_id >= c.vocab_size) {
    return Status::InvalidArgument("generate: eos_id outside the vocabulary");
  }
  for (int64_t id : o.stop_ids) {
    if (id < 0 || id >= c.vocab_size) return Status::InvalidArgument("generate: a stop id is outside the vocabulary");
  }
  if (!o.max_new_tokens_each.empty() && o.max_new_tokens_each.size() != prompts.size()) {
    return Status::InvalidArgument("generate: max_new_tokens_each must have one value per prompt");
  }
  for (int64_t n : o.max_new_tokens_each) {
    if (n < 1) return Status::InvalidArgument("generate: max_new_tokens_each holds a value < 1");
  }
  if (o.more_prompts && (!o.max_new_tokens_each.empty() || o.max_new_tokens < 1)) {
    return Status::InvalidArgument("generate: more_prompts needs max_new_tokens >= 1 and no max_new_tokens_each");
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    RL_RETURN_IF_ERROR(CheckPrompt(c, prompts[i], "generate: prompt " + std::to_string(i)));
  }
  return Status::OK();
}

void AppendRoutes(const at::Tensor& used, Generation* g) {
  const at::Tensor flat = used.to(at::kInt).contiguous().view({-1});
  const int32_t* p = flat.data_ptr<int32_t>();
  g->routes.insert(g->routes.end(), p, p + flat.numel());
}

namespace {

// The continuous-batching loop: refill free slots (asking for more prompts when streaming), sample
// every active slot, feed the tokens of the slots that go on.
class Scheduler {
 public:
  Scheduler(const ModelConfig& config, const std::vector<std::vector<int64_t>>& prompts,
            const GenerateOptions& options, std::unique_ptr<Decoder>* decoder, Sampler* sampler)
      : config_(config),
        prompts_(prompts),
        options_(options),
        decoder_(decoder),
        sampler_(sampler),
        slots_(static_cast<size_t>(options.slots)),
        out_(prompts.size()),
        version_(options.version) {}

  Result<std::vector<Generation>> Run(GenerateStats* stats) {
    for (;;) {
      if (options_.newer_weights) RL_RETURN_IF_ERROR(MaybeSwitch());
      RL_RETURN_IF_ERROR(Refill());
      std::vector<int64_t> active;
      for (size_t s = 0; s < slots_.size(); ++s) {
        if (slots_[s].seq >= 0) active.push_back(static_cast<int64_t>(s));
      }
      if (active.empty()) break;
      RL_RETURN_IF_ERROR(SampleAndFeed(active));
    }
    if (stats != nullptr) {
      sw_.steps = steps_;
      sw_.forward_calls = forward_calls_ + (*decoder_)->forward_calls();
      sw_.new_tokens = new_tokens_;
      *stats = sw_;
    }
    return std::move(out_);
  }

 private:
  struct Slot {
    int64_t seq = -1;    // index of the prompt being continued; -1 when free
    int64_t length = 0;  // prompt + response tokens
    at::Tensor logits;   // [V]: what follows the sequence
  };

  // Interruptible generation (generate.h): when newer weights are ready, a decoder of the new
  // model, every live sequence prefilled again under it, and its pending logits replaced.
  Status MaybeSwitch() {
    RL_ASSIGN_OR_RETURN(std::optional<WeightSwitch> next, options_.newer_weights());
    if (!next) return Status::OK();
    const ModelConfig& c = next->model->config();
    if (c.vocab_size != config_.vocab_size || c.context() != config_.context()) {
      return Status::InvalidArgument("generate: weights version " + std::to_string(next->version) +
                                     " have another vocabulary size or context; cannot continue under them");
    }
    const auto start = std::chrono::steady_clock::now();
    forward_calls_ += (*decoder_)->forward_calls();
    decoder_->reset();  // the old cache first: never two in memory
    RL_ASSIGN_OR_RETURN(*decoder_, options_.use_kv_cache ? NewCacheDecoder(next->model, options_.slots)
                                                         : NewFullDecoder(next->model, options_.slots));
    version_ = next->version;
    ++sw_.switches;
    std::vector<int64_t> live;
    std::vector<std::vector<int64_t>> seqs;
    for (size_t s = 0; s < slots_.size(); ++s) {
      const int64_t seq = slots_[s].seq;
      if (seq < 0) continue;
      live.push_back(static_cast<int64_t>(s));
      std::vector<int64_t> ids = prompts_[static_cast<size_t>(seq)];
      const std::vector<int64_t>& r = out_[static_cast<size_t>(seq)].response_ids;
      ids.insert(ids.end(), r.begin(), r.end());
      sw_.reprefill_tokens += static_cast<int64_t>(ids.size());
      seqs.push_back(std::move(ids));
    }
    sw_.interrupted += static_cast<int64_t>(live.size());
    if (live.empty()) return Status::OK();
    std::vector<const std::vector<int64_t>*> ptrs;
    for (const auto& q : seqs) ptrs.push_back(&q);
    RL_ASSIGN_OR_RETURN(at::Tensor logits, (*decoder_)->Start(live, ptrs, routes()));
    for (size_t i = 0; i < live.size(); ++i) {
      Slot& slot = slots_[static_cast<size_t>(live[i])];
      slot.logits = logits[static_cast<int64_t>(i)];
      if (options_.record_routes) {
        Generation& g = out_[static_cast<size_t>(slot.seq)];
        g.routes.clear();
        AppendRoutes(routes_[i], &g);
      }
    }
    sw_.switch_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return Status::OK();
  }

  // Streaming: more prompts when a slot is free and none is pending, each checked as the
  // caller's are (an error ends the call; the caller still holds what it handed out).
  Status AskForMore() {
    if (!options_.more_prompts || quiet_ || next_ < prompts_.size()) return Status::OK();
    int64_t free = 0;
    for (const Slot& s : slots_) free += s.seq < 0 ? 1 : 0;
    if (free == 0) return Status::OK();
    RL_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> more, options_.more_prompts(free));
    quiet_ = more.empty();
    for (auto& p : more) {
      RL_RETURN_IF_ERROR(CheckPrompt(config_, p, "generate: added prompt " + std::to_string(prompts_.size())));
      prompts_.push_back(std::move(p));
      out_.emplace_back();
    }
    return Status::OK();
  }

  Status Refill() {
    RL_RETURN_IF_ERROR(AskForMore());
    std::vector<int64_t> slots;
    std::vector<const std::vector<int64_t>*> prompts;
    for (size_t s = 0; s < slots_.size() && next_ < prompts_.size(); ++s) {
      if (slots_[s].seq >= 0) continue;
      slots_[s].seq = static_cast<int64_t>(next_);
      slots_[s].length = static_cast<int64_t>(prompts_[next_].size());
      slots.push_back(static_cast<int64_t>(s));
      prompts.push_back(&prompts_[next_++]);
    }
    if (slots.empty()) return Status::OK();
    RL_ASSIGN_OR_RETURN(at::Tensor logits, (*decoder_)->Start(slots, prompts, routes()));
    for (size_t i = 0; i < slots.size(); ++i) {
      const Slot& slot = slots_[static_cast<size_t>(slots[i])];
      slots_[static_cast<size_t>(slots[i])].logits = logits[static_cast<int64_t>(i)];
      if (options_.record_routes) AppendRoutes(routes_[i], &out_[static_cast<size_t>(slot.seq)]);
    }
    return Status::OK();
  }

  Status SampleAndFeed(const std::vector<int64_t>& active) {
    std::vector<at::Tensor> rows;
    for (int64_t s : active) rows.push_back(slots_[static_cast<size_t>(s)].logits);
    RL_ASSIGN_OR_RETURN(
        at::Tensor stacked,
        TorchGuard("generate: stack", [&]() -> Result<at::Tensor> { return at::stack(rows); }));
    RL_ASSIGN_OR_RETURN(Sample sample, sampler_->Draw(stacked));
    ++steps_;
    const at::Tensor ids = sample.ids.contiguous(), logprobs = sample.logprobs.contiguous();
    std::vector<int64_t> going, tokens;
    for (size_t i = 0; i < active.size(); ++i) {
      Slot& slot = slots_[static_cast<size_t>(active[i])];
      Generation& g = out_[static_cast<size_t>(slot.seq)];
      const int64_t id = ids.data_ptr<int64_t>()[i];
      g.response_ids.push_back(id);
      g.logprobs.push_back(logprobs.data_ptr<float>()[i]);
      g.versions.push_back(version_);
      ++slot.length;
      ++new_tokens_;
      if (Stopped(id, slot, &g)) {
        const size_t seq = static_cast<size_t>(slot.seq);
        slot.seq = -1;
        quiet_ = false;
        if (options_.on_finished) RL_RETURN_IF_ERROR(options_.on_finished(seq, g));
      } else {
        going.push_back(active[i]);
        tokens.push_back(id);
      }
    }
    if (going.empty()) return Status::OK();
    RL_ASSIGN_OR_RETURN(at::Tensor logits, (*decoder_)->Step(going, tokens, routes()));
    for (size_t i = 0; i < going.size(); ++i) {
      Slot& slot = slots_[static_cast<size_t>(going[i])];
      slot.logits = logits[static_cast<int64_t>(i)];
      if (options_.record_routes) AppendRoutes(routes_[i], &out_[static_cast<size_t>(slot.seq)]);
    }
    return Status::OK();
  }

  std::vector<at::Tensor>* routes() { return options_.record_routes ? &routes_ : nullptr; }

  bool Stopped(int64_t id, const Slot& slot, Generation* g) const {
    const int64_t cap = options_.max_new_tokens_each.empty()
                            ? options_.max_new_tokens
                            : options_.max_new_tokens_each[static_cast<size_t>(slot.seq)];
    return StopsAfter(options_, cap, id, static_cast<int64_t>(g->response_ids.size()), slot.length,
                      config_.context(), g);
  }

  const ModelConfig config_;  // a copy: newer weights may replace the model it came from
  std::vector<std::vector<int64_t>> prompts_;  // the caller's, then those more_prompts added
  const GenerateOptions& options_;
  std::unique_ptr<Decoder>* decoder_;
  Sampler* sampler_;
  std::vector<Slot> slots_;
  std::vector<Generation> out_;
  size_t next_ = 0;
  bool quiet_ = false;  // more_prompts had none: not asked again until a sequence stops
  int64_t steps_ = 0, new_tokens_ = 0, forward_calls_ = 0;  // forward_calls_: of decoders replaced
  int64_t version_;
  GenerateStats sw_;  // the switch counters
  std::vector<at::Tensor> routes_;  // the last decoder call's, when recording
};

}  // namespace

bool StopsAfter(const GenerateOptions& options, int64_t cap, int64_t id, int64_t generated,
                int64_t length, int64_t context, Generation* g) {
  if (id == options.eos_id) {
    g->stop = StopReason::kEos;
  } else if (std::find(options.stop_ids.begin(), options.stop_ids.end(), id) != options.stop_ids.end()) {
    g->stop = StopReason::kStop;
  } else if (generated >= cap) {
    g->stop = StopReason::kMaxTokens;
  } else if (length >= context) {
    g->stop = StopReason::kContext;
  } else {
    return false;
  }
  return true;
}

Result<std::vector<Generation>> Generate(const Transformer& model,
                                         const std::vector<std::vector<int64_t>>& prompts,
                                         const GenerateOptions& options, GenerateStats* stats) {
  RL_RETURN_IF_ERROR(CheckGenerateRequest(model.config(), prompts, options));
  if (options.max_new_tokens == 0 && options.max_new_tokens_each.empty()) {
    if (stats != nullptr) *stats = GenerateStats{};
    return std::vector<Generation>(prompts.size());
  }
  RL_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(options.sampling, options.seed));
  // Streaming calls take more prompts as they go: every slot may be used.
  const int64_t slots = options.more_prompts ? options.slots
                                             : std::min<int64_t>(options.slots, std::max<size_t>(prompts.size(), 1));
  RL_ASSIGN_OR_RETURN(std::unique_ptr<Decoder> decoder, options.use_kv_cache
                                                            ? NewCacheDecoder(&model, slots)
                                                            : NewFullDecoder(&model, slots));
  GenerateOptions effective = options;
  effective.slots = slots;
  return TorchGuard("generate", [&]() -> Result<std::vector<Generation>> {
    return Scheduler(model.config(), prompts, effective, &decoder, &sampler).Run(stats);
  });
}

}  // namespace rl::model
