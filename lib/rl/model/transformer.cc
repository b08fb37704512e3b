#include "rl/model/transformer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "rl/model/kv_cache.h"
#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"
#include "rl/model/transformer_module.h"

namespace rl::model {
namespace {

Status CheckTokens(const at::Tensor& tokens, const ModelConfig& c, const char* what) {
  if (!tokens.defined() || tokens.dim() != 2 || tokens.scalar_type() != at::kLong) {
    return Status::InvalidArgument(std::string(what) + ": tokens must be a 2-D int64 tensor");
  }
  if (tokens.size(0) < 1 || tokens.size(1) < 1) {
    return Status::InvalidArgument(std::string(what) + ": tokens must not be empty");
  }
  if (tokens.size(1) > c.context()) {
    return Status::InvalidArgument(std::string(what) + ": " + std::to_string(tokens.size(1)) +
                                   " tokens exceed the context of " + std::to_string(c.context()));
  }
  const int64_t lo = tokens.min().item<int64_t>(), hi = tokens.max().item<int64_t>();
  if (lo < 0 || hi >= c.vocab_size) {
    return Status::InvalidArgument(std::string(what) + ": token ids must be in [0, " +
                                   std::to_string(c.vocab_size) + ")");
  }
  return Status::OK();
}

Status CheckSlots(const at::Tensor& tokens, const std::vector<int64_t>& slots,
                  const KvCache& cache) {
  if (static_cast<int64_t>(slots.size()) != tokens.size(0)) {
    return Status::InvalidArgument("forward step: " + std::to_string(slots.size()) + " slots for " +
                                   std::to_string(tokens.size(0)) + " rows");
  }
  std::vector<bool> seen(static_cast<size_t>(cache.slots()), false);
  for (int64_t s : slots) {
    if (s < 0 || s >= cache.slots()) {
      return Status::InvalidArgument("forward step: slot " + std::to_string(s) + " out of range");
    }
    if (seen[static_cast<size_t>(s)]) {
      return Status::InvalidArgument("forward step: slot " + std::to_string(s) + " repeated");
    }
    seen[static_cast<size_t>(s)] = true;
    if (cache.length(s) + tokens.size(1) > cache.capacity()) {
      return Status::InvalidArgument("forward step: slot " + std::to_string(s) +
                                     " would pass the context of " +
                                     std::to_string(cache.capacity()));
    }
  }
  return Status::OK();
}

// Routes (transformer.h) for tokens [B, T] as the stack takes them: one [B * T, k] tensor per
// sparse layer on `device`; and the recorded ones back as [B, T, S, k] on the CPU.
Result<StackRoutes> StackRoutesOf(const Routes& routes, const at::Tensor& tokens, const ModelConfig& c,
                                  const c10::Device& device, std::vector<at::Tensor>* record) {
  StackRoutes out;
  const int64_t sparse = c.SparseLayerCount();
  if (sparse > 0) out.record = record;
  if (!routes.replay.defined() || sparse == 0) return out;
  const at::Tensor& r = routes.replay;
  const int64_t b = tokens.size(0), t = tokens.size(1), k = c.moe.num_experts_per_tok;
  if (r.dim() != 4 || r.size(0) != b || r.size(1) != t || r.size(2) != sparse || r.size(3) != k ||
      at::isFloatingType(r.scalar_type()) || r.scalar_type() == at::kBool) {
    return Status::InvalidArgument("routes: replayed routes must be integers [" + std::to_string(b) + ", " +
                                   std::to_string(t) + ", " + std::to_string(sparse) + ", " + std::to_string(k) +
                                   "] for these tokens");
  }
  const at::Tensor r64 = r.to(at::kLong);
  const at::Tensor free = r64.lt(0);
  const at::Tensor sorted = std::get<0>(r64.sort(-1));
  const bool mixed = !free.any(-1).eq(free.all(-1)).all().item<bool>();
  const bool out_of_range = r64.lt(-1).any().item<bool>() || r64.ge(c.moe.num_experts).any().item<bool>();
  const bool repeated =
      k > 1 && (sorted.narrow(-1, 1, k - 1).eq(sorted.narrow(-1, 0, k - 1)) & free.logical_not().narrow(-1, 1, k - 1))
                   .any()
                   .item<bool>();
  if (mixed || out_of_range || repeated) {
    return Status::InvalidArgument("routes: each replayed route must be " + std::to_string(k) +
                                   " distinct experts in [0, " + std::to_string(c.moe.num_experts) + ") or " +
                                   std::to_string(k) + " times -1");
  }
  const at::Tensor on = r64.to(device);
  for (int64_t s = 0; s < sparse; ++s) out.replay.push_back(on.select(2, s).reshape({b * t, k}));
  return out;
}

void TakeRecorded(const std::vector<at::Tensor>& layers, const at::Tensor& tokens, at::Tensor* record) {
  if (record == nullptr) return;
  if (layers.empty()) {
    *record = at::empty({tokens.size(0), tokens.size(1), 0, 0}, at::kLong);
    return;
  }
  *record = at::stack(layers, 1).view({tokens.size(0), tokens.size(1), static_cast<int64_t>(layers.size()), -1}).cpu();
}

}  // namespace

at::ScalarType ScalarTypeOf(DType d) {
  switch (d) {
    case DType::kBF16: return at::kBFloat16;
    case DType::kF16: return at::kHalf;
    default: return at::kFloat;
  }
}

Result<Transformer> Transformer::Create(const ModelConfig& config, uint64_t seed, DType dtype) {
  return Create(config, seed, dtype, TensorParallel{});
}

Result<Transformer> Transformer::Create(const ModelConfig& config, uint64_t seed, DType dtype,
                                        const TensorParallel& tp) {
  RL_RETURN_IF_ERROR(config.Validate());
  RL_ASSIGN_OR_RETURN(Transformer whole,
                      TorchGuard("transformer: create", [&]() -> Result<Transformer> {
                        auto impl = std::make_shared<TransformerImpl>(config);
                        if (dtype != DType::kF32) impl->to(ScalarTypeOf(dtype));
                        impl->InitWeights(seed);
                        return Transformer(std::move(impl));
                      }));
  if (tp.size == 1 && tp.rank == 0) return whole;
  return whole.Shard(tp);
}

Result<Transformer> Transformer::Shard(const TensorParallel& tp) const {
  if (tensor_parallel().size != 1) {
    return Status::InvalidArgument("transformer: shard: the model is already a shard");
  }
  RL_RETURN_IF_ERROR(CheckTensorParallel(config(), tp.size));
  if (tp.rank < 0 || tp.rank >= tp.size || (tp.size > 1 && !tp.all_reduce)) {
    return Status::InvalidArgument("transformer: shard: rank " + std::to_string(tp.rank) +
                                   " of " + std::to_string(tp.size) + " needs an all_reduce");
  }
  RL_ASSIGN_OR_RETURN(NamedTensors shards,
                      ShardNamedTensors(NamedParameters(), config(), tp.rank, tp.size));
  RL_ASSIGN_OR_RETURN(Transformer shard,
                      TorchGuard("transformer: shard", [&]() -> Result<Transformer> {
                        auto impl = std::make_shared<TransformerImpl>(config(), tp);
                        if (dtype() != DType::kF32) impl->to(ScalarTypeOf(dtype()));
                        if (!device().is_cpu()) impl->MoveTo(device());
                        return Transformer(std::move(impl));
                      }));
  RL_RETURN_IF_ERROR(shard.LoadNamedParameters(shards));
  return shard;
}

const ModelConfig& Transformer::config() const { return impl_->config(); }

const TensorParallel& Transformer::tensor_parallel() const { return impl_->tensor_parallel(); }

DType Transformer::dtype() const {
  const at::ScalarType t = impl_->parameters().front().scalar_type();
  if (t == at::kBFloat16) return DType::kBF16;
  return t == at::kHalf ? DType::kF16 : DType::kF32;
}

c10::Device Transformer::device() const { return impl_->parameters().front().device(); }

Status Transformer::To(const c10::Device& device) {
  if (device == this->device()) return Status::OK();
  return TorchGuard("transformer: to device", [&]() -> Status {
    impl_->MoveTo(device);
    return Status::OK();
  });
}

Status Transformer::ToDType(DType dtype) {
  if (dtype == this->dtype()) return Status::OK();
  return TorchGuard("transformer: to dtype", [&]() -> Status {
    impl_->to(ScalarTypeOf(dtype));
    return Status::OK();
  });
}

torch::nn::Module& Transformer::module() const { return *impl_; }

Result<at::Tensor> Transformer::Forward(const at::Tensor& tokens, const Routes& routes) const {
  return TorchGuard("transformer: forward", [&]() -> Result<at::Tensor> {
    RL_RETURN_IF_ERROR(CheckTokens(tokens, config(), "forward"));
    std::vector<at::Tensor> recorded;
    RL_ASSIGN_OR_RETURN(StackRoutes stack, StackRoutesOf(routes, tokens, config(), device(), &recorded));
    const at::Tensor t = tokens.to(device());
    const at::Tensor positions = at::arange(t.size(1), t.options()).unsqueeze(0).expand_as(t);
    at::Tensor logits = impl_->forward(t, positions, nullptr, {}, false, 0, false, stack);
    TakeRecorded(recorded, tokens, routes.record);
    return logits;
  });
}

Result<at::Tensor> Transformer::HiddenStates(const at::Tensor& tokens, const Routes& routes) const {
  return TorchGuard("transformer: hidden states", [&]() -> Result<at::Tensor> {
    RL_RETURN_IF_ERROR(CheckTokens(tokens, config(), "hidden states"));
    std::vector<at::Tensor> recorded;
    RL_ASSIGN_OR_RETURN(StackRoutes stack, StackRoutesOf(routes, tokens, config(), device(), &recorded));
    const at::Tensor t = tokens.to(device());
    const at::Tensor positions = at::arange(t.size(1), t.options()).unsqueeze(0).expand_as(t);
    at::Tensor h = impl_->hidden(t, positions, stack);
    TakeRecorded(recorded, tokens, routes.record);
    return h;
  });
}

Result<at::Tensor> Transformer::MaskedTokenLogprobs(const at::Tensor& tokens_in, const at::Tensor& mask_in,
                                                    double temperature, const Routes& routes) const {
  if (!(temperature > 0) || !std::isfinite(temperature)) {
    return Status::InvalidArgument("token logprobs: the temperature must be positive and finite");
  }
  return TorchGuard("transformer: token logprobs", [&]() -> Result<at::Tensor> {
    RL_RETURN_IF_ERROR(CheckTokens(tokens_in, config(), "token logprobs"));
    const int64_t len = tokens_in.size(1);
    if (len < 2 || mask_in.dim() != 2 || mask_in.size(0) != tokens_in.size(0) || mask_in.size(1) != len - 1) {
      return Status::InvalidArgument("token logprobs: the mask must be [B, T-1] for tokens [B, T]");
    }
    std::vector<at::Tensor> recorded;
    RL_ASSIGN_OR_RETURN(StackRoutes stack, StackRoutesOf(routes, tokens_in, config(), device(), &recorded));
    const at::Tensor tokens = tokens_in.to(device()), mask = mask_in.to(device());
    const at::Tensor positions = at::arange(len, tokens.options()).unsqueeze(0).expand_as(tokens);
    const at::Tensor x = impl_->hidden(tokens, positions, stack).narrow(1, 0, len - 1);
    TakeRecorded(recorded, tokens_in, routes.record);
    const at::Tensor keep = mask.ne(0);
    const at::Tensor next = tokens.narrow(1, 1, len - 1).index({keep});
    at::Tensor logits = impl_->logits(x.index({keep}));
    if (temperature != 1) logits = logits / temperature;
    const at::Tensor logp = at::log_softmax(logits, -1);
    const at::Tensor picked = logp.gather(1, next.unsqueeze(1)).squeeze(1);
    return at::zeros({tokens.size(0), len - 1}, picked.options()).index_put({keep}, picked);
  });
}

Result<at::Tensor> Transformer::ForwardStep(const at::Tensor& tokens,
                                            const std::vector<int64_t>& slots,
                                            KvCache* cache, bool last_only, const Routes& routes) const {
  return TorchGuard("transformer: forward step", [&]() -> Result<at::Tensor> {
    RL_RETURN_IF_ERROR(CheckTokens(tokens, config(), "forward step"));
    if (cache == nullptr || cache->n_layers() != config().num_hidden_layers ||
        cache->capacity() != config().context() ||
        cache->n_kv_heads() != config().kv_heads() / tensor_parallel().size ||
        cache->head_dim() != config().head_width() || cache->dtype() != dtype() ||
        cache->device() != device()) {
      return Status::InvalidArgument("forward step: the cache does not match the model");
    }
    RL_RETURN_IF_ERROR(CheckSlots(tokens, slots, *cache));
    std::vector<at::Tensor> recorded;
    RL_ASSIGN_OR_RETURN(StackRoutes stack, StackRoutesOf(routes, tokens, config(), device(), &recorded));
    c10::NoGradGuard no_grad;
    const int64_t t = tokens.size(1);
    std::vector<int64_t> starts;
    int64_t kv_len = 0;
    bool all_slots = static_cast<int64_t>(slots.size()) == cache->slots();
    for (size_t b = 0; b < slots.size(); ++b) {
      starts.push_back(cache->length(slots[b]));
      kv_len = std::max(kv_len, starts.back() + t);
      all_slots = all_slots && slots[b] == static_cast<int64_t>(b);
    }
    const at::Tensor positions =
        (at::tensor(starts, at::kLong).unsqueeze(1) + at::arange(t, at::kLong).unsqueeze(0)).to(device());
    const at::Tensor slot_t = at::tensor(slots, at::kLong).to(device());
    at::Tensor logits =
        impl_->forward(tokens.to(device()), positions, cache, slot_t, all_slots, kv_len, last_only, stack);
    for (int64_t s : slots) cache->Advance(s, t);
    TakeRecorded(recorded, tokens, routes.record);
    return logits;
  });
}

std::vector<at::Tensor> Transformer::Parameters() const { return impl_->parameters(); }

NamedTensors Transformer::NamedParameters() const {
  NamedTensors out;
  for (const auto& item : impl_->named_parameters()) out.emplace_back(item.key(), item.value());
  return out;
}

Status Transformer::LoadNamedParameters(const NamedTensors& tensors) {
  return TorchGuard("transformer: load parameters", [&]() -> Status {
    std::unordered_map<std::string, const at::Tensor*> given;
    for (const auto& [name, t] : tensors) {
      if (!given.emplace(name, &t).second) {
        return Status::DataError("load parameters: '" + name + "' appears twice");
      }
    }
    auto params = impl_->named_parameters();
    if (given.size() != params.size()) {
      return Status::DataError("load parameters: " + std::to_string(given.size()) +
                               " tensors for " + std::to_string(params.size()) + " parameters");
    }
    for (const auto& item : params) {  // check everything before changing anything
      auto it = given.find(item.key());
      if (it == given.end()) {
        return Status::DataError("load parameters: missing '" + item.key() + "'");
      }
      if (!it->second->defined() || it->second->sizes() != item.value().sizes()) {
        return Status::DataError("load parameters: '" + item.key() + "' has the wrong shape");
      }
    }
    c10::NoGradGuard no_grad;
    for (auto& item : params) item.value().copy_(*given.at(item.key()));
    return Status::OK();
  });
}

Result<Transformer> Transformer::Clone() const { return Clone(device()); }

Result<Transformer> Transformer::Clone(const c10::Device& device) const {
  RL_ASSIGN_OR_RETURN(Transformer copy,
                      TorchGuard("transformer: clone", [&]() -> Result<Transformer> {
                        auto impl = std::make_shared<TransformerImpl>(config(), tensor_parallel());
                        if (dtype() != DType::kF32) impl->to(ScalarTypeOf(dtype()));
                        if (!device.is_cpu()) impl->MoveTo(device);
                        if (device.is_cpu() && !this->device().is_cpu()) {
                          // A snapshot of a GPU's weights: pinned, so that the copy is a DMA.
                          c10::NoGradGuard no_grad;
                          for (at::Tensor& p : impl->parameters()) {
                            p.set_data(at::empty(p.sizes(), p.options().pinned_memory(true)));
                          }
                        }
                        return Transformer(std::move(impl));
                      }));
  RL_RETURN_IF_ERROR(copy.LoadNamedParameters(NamedParameters()));
  return copy;
}

}  // namespace rl::model
