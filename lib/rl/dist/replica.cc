#include "rl/dist/replica.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"

namespace rl::dist {

using model::TorchGuard;

Result<Replica> Replica::Create(const model::Transformer* model, int64_t slots,
                                const std::vector<std::vector<int64_t>>* prompts,
                                const model::GenerateOptions* options, uint64_t seed) {
  model::GenerateOptions check = *options;
  check.slots = slots;
  RL_RETURN_IF_ERROR(model::CheckGenerateRequest(model->config(), *prompts, check));
  RL_ASSIGN_OR_RETURN(model::KvCache cache,
                      model::KvCache::Create(model->config(), slots, model->dtype(),
                                             model->tensor_parallel().size, model->device()));
  RL_ASSIGN_OR_RETURN(model::Sampler sampler, model::Sampler::Create(options->sampling, seed));
  return Replica(model, std::move(cache), prompts, options, std::move(sampler));
}

Replica::Replica(const model::Transformer* model, model::KvCache cache,
                 const std::vector<std::vector<int64_t>>* prompts,
                 const model::GenerateOptions* options, model::Sampler sampler)
    : model_(model),
      cache_(std::move(cache)),
      prompts_(prompts),
      options_(options),
      sampler_(std::move(sampler)),
      slots_(static_cast<size_t>(cache_.slots())) {}

int64_t Replica::active() const {
  return std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.busy; });
}

bool Replica::records_routes() const { return options_->record_routes && model_->config().SparseLayerCount() > 0; }

model::Routes Replica::Recording(at::Tensor* used) const {
  model::Routes r;
  if (records_routes()) r.record = used;
  return r;
}

int64_t Replica::Cap(int64_t prompt) const {
  return options_->max_new_tokens_each.empty()
             ? options_->max_new_tokens
             : options_->max_new_tokens_each[static_cast<size_t>(prompt)];
}

Status Replica::Prefill(int64_t slot, const std::vector<int64_t>& tokens) {
  RL_RETURN_IF_ERROR(cache_.Reset(slot));
  RL_ASSIGN_OR_RETURN(at::Tensor ids, TorchGuard("replica: prefill", [&]() -> Result<at::Tensor> {
                        return at::tensor(tokens, at::kLong).unsqueeze(0);
                      }));
  at::Tensor used;
  RL_ASSIGN_OR_RETURN(at::Tensor logits, model_->ForwardStep(ids, {slot}, &cache_, /*last_only=*/true, Recording(&used)));
  SequenceState& seq = slots_[static_cast<size_t>(slot)].seq;
  return TorchGuard("replica: prefill", [&]() -> Status {
    seq.logits = logits[0][0];
    if (used.defined()) {  // the routes the cache now holds: a recomputed sequence's replace its own
      seq.generation.routes.clear();
      model::AppendRoutes(used[0], &seq.generation);
    }
    return Status::OK();
  });
}

Result<RoundStats> Replica::Round(std::vector<model::Generation>* out) {
  RoundStats stats;
  for (size_t s = 0; s < slots_.size() && !pending_.empty(); ++s) {
    if (slots_[s].busy) continue;
    const int64_t prompt = pending_.front();
    pending_.pop_front();
    Slot& slot = slots_[s];
    slot.busy = true;
    slot.seq = SequenceState{prompt, (*prompts_)[static_cast<size_t>(prompt)], {}, {}};
    RL_RETURN_IF_ERROR(Prefill(static_cast<int64_t>(s), slot.seq.tokens));
    ++stats.prefills;
  }
  std::vector<int64_t> active;
  std::vector<at::Tensor> rows;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (!slots_[s].busy) continue;
    active.push_back(static_cast<int64_t>(s));
    rows.push_back(slots_[s].seq.logits);
    stats.context_tokens += static_cast<int64_t>(slots_[s].seq.tokens.size());
  }
  stats.batch = static_cast<int64_t>(active.size());
  if (active.empty()) return stats;
  RL_ASSIGN_OR_RETURN(at::Tensor stacked, TorchGuard("replica: stack", [&]() -> Result<at::Tensor> {
                        return at::stack(rows);
                      }));
  RL_ASSIGN_OR_RETURN(model::Sample sample, sampler_.Draw(stacked));
  const at::Tensor ids = sample.ids.contiguous(), logprobs = sample.logprobs.contiguous();
  std::vector<int64_t> going, tokens;
  for (size_t i = 0; i < active.size(); ++i) {
    Slot& slot = slots_[static_cast<size_t>(active[i])];
    SequenceState& seq = slot.seq;
    const int64_t id = ids.data_ptr<int64_t>()[i];
    seq.generation.response_ids.push_back(id);
    seq.generation.logprobs.push_back(logprobs.data_ptr<float>()[i]);
    seq.tokens.push_back(id);
    const int64_t generated = static_cast<int64_t>(seq.generation.response_ids.size());
    if (model::StopsAfter(*options_, Cap(seq.prompt), id, generated,
                          static_cast<int64_t>(seq.tokens.size()), model_->config().context(),
                          &seq.generation)) {
      (*out)[static_cast<size_t>(seq.prompt)] = std::move(seq.generation);
      slot = Slot{};
    } else {
      going.push_back(active[i]);
      tokens.push_back(id);
    }
  }
  if (going.empty()) return stats;
  RL_ASSIGN_OR_RETURN(at::Tensor step, TorchGuard("replica: step", [&]() -> Result<at::Tensor> {
                        return at::tensor(tokens, at::kLong).unsqueeze(1);
                      }));
  at::Tensor used;
  RL_ASSIGN_OR_RETURN(at::Tensor logits, model_->ForwardStep(step, going, &cache_, false, Recording(&used)));
  RL_RETURN_IF_ERROR(TorchGuard("replica: step", [&]() -> Status {
    for (size_t i = 0; i < going.size(); ++i) {
      SequenceState& seq = slots_[static_cast<size_t>(going[i])].seq;
      seq.logits = logits[static_cast<int64_t>(i)][0];
      if (used.defined()) model::AppendRoutes(used[static_cast<int64_t>(i)], &seq.generation);
    }
    return Status::OK();
  }));
  return stats;
}

std::vector<std::pair<int64_t, int64_t>> Replica::LengthsAndBudgets() const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const Slot& s : slots_) {
    if (!s.busy) continue;
    const int64_t generated = static_cast<int64_t>(s.seq.generation.response_ids.size());
    const int64_t room = model_->config().context() - static_cast<int64_t>(s.seq.tokens.size());
    out.emplace_back(static_cast<int64_t>(s.seq.tokens.size()),
                     std::min(Cap(s.seq.prompt) - generated, room));
  }
  return out;
}

Result<Replica::Exported> Replica::TakeActive() {
  return TorchGuard("replica: take", [&]() -> Result<Exported> {
    Exported e;
    std::vector<int64_t> slots;
    int64_t max_len = 0;
    for (size_t s = 0; s < slots_.size(); ++s) {
      if (!slots_[s].busy) continue;
      slots.push_back(static_cast<int64_t>(s));
      max_len = std::max(max_len, cache_.length(static_cast<int64_t>(s)));
    }
    const at::Tensor index = at::tensor(slots, at::kLong).to(cache_.device());  // index_select wants it there
    for (int64_t l = 0; l < cache_.n_layers(); ++l) {
      // Positions past a slot's length hold an earlier occupant's data: zero them, so that what
      // moves is exactly the valid entries (and the receiver could compress them).
      at::Tensor k = cache_.keys(l).index_select(0, index).narrow(2, 0, max_len).clone();
      at::Tensor v = cache_.values(l).index_select(0, index).narrow(2, 0, max_len).clone();
      for (size_t i = 0; i < slots.size(); ++i) {
        const int64_t len = cache_.length(slots[i]);
        k[static_cast<int64_t>(i)].narrow(1, len, max_len - len).zero_();
        v[static_cast<int64_t>(i)].narrow(1, len, max_len - len).zero_();
      }
      e.keys.push_back(k);
      e.values.push_back(v);
    }
    for (int64_t s : slots) {
      e.sequences.push_back(std::move(slots_[static_cast<size_t>(s)].seq));
      slots_[static_cast<size_t>(s)] = Slot{};
      RL_RETURN_IF_ERROR(cache_.Reset(s));
    }
    return e;
  });
}

Result<std::vector<int64_t>> Replica::FreeSlots(size_t wanted) const {
  std::vector<int64_t> free;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (!slots_[s].busy) free.push_back(static_cast<int64_t>(s));
  }
  if (free.size() < wanted) {
    return Status::InvalidArgument("replica: " + std::to_string(wanted) + " sequences for " +
                                   std::to_string(free.size()) + " free slots");
  }
  return free;
}

Status Replica::PutActive(std::vector<SequenceState> sequences, const std::vector<at::Tensor>& keys,
                          const std::vector<at::Tensor>& values) {
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> free, FreeSlots(sequences.size()));
  if (static_cast<int64_t>(keys.size()) != cache_.n_layers() || keys.size() != values.size()) {
    return Status::InvalidArgument("replica: cache entries for the wrong number of layers");
  }
  return TorchGuard("replica: put", [&]() -> Status {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < sequences.size(); ++i) {
      const int64_t slot = free[i];
      const int64_t len = static_cast<int64_t>(sequences[i].tokens.size());
      RL_RETURN_IF_ERROR(cache_.Reset(slot));
      for (int64_t l = 0; l < cache_.n_layers(); ++l) {
        const auto li = static_cast<size_t>(l);
        if (keys[li].size(1) != cache_.n_kv_heads() || keys[li].size(2) < len) {
          return Status::InvalidArgument("replica: cache entries of the wrong shape");
        }
        cache_.keys(l)[slot].narrow(1, 0, len).copy_(keys[li][static_cast<int64_t>(i)].narrow(1, 0, len));
        cache_.values(l)[slot].narrow(1, 0, len).copy_(values[li][static_cast<int64_t>(i)].narrow(1, 0, len));
      }
      cache_.Advance(slot, len);
      slots_[static_cast<size_t>(slot)] = Slot{true, std::move(sequences[i])};
    }
    return Status::OK();
  });
}

Status Replica::RecomputeActive(std::vector<SequenceState> sequences) {
  RL_ASSIGN_OR_RETURN(std::vector<int64_t> free, FreeSlots(sequences.size()));
  for (size_t i = 0; i < sequences.size(); ++i) {
    Slot& slot = slots_[static_cast<size_t>(free[i])];
    slot = Slot{true, std::move(sequences[i])};
    RL_RETURN_IF_ERROR(Prefill(free[i], slot.seq.tokens));
  }
  return Status::OK();
}

}  // namespace rl::dist
