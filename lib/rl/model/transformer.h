// Transformer: the handle through which the toolkit uses its decoder-only language model (a
// Hugging Face Llama, Qwen2 or Qwen3, see config.h) — full forward passes for training,
// incremental decoding against a KvCache, and the state dict under HF's tensor names.
//
// Compute dtype: the parameters are float32 by default; Create (and LoadHfModel) can make them
// bfloat16 or float16. Logits are float32 whatever the compute dtype; RMSNorm and softmax run in
// float32 as in HF.
//
// Device: a model is made on the CPU and moved with To (device.h). Inputs may be on any device:
// the calls below move tokens and masks to the model's, and return tensors on the model's device.
//
// The network itself is TransformerImpl (transformer_module.h, a torch::nn module); this header
// keeps libtorch's heavy headers out (it includes only the ATen tensor type), validates inputs,
// and turns every libtorch exception into a Status.
//
// A Transformer is a shared handle, like a TORCH_MODULE holder: copies refer to the same weights.
// Clone() makes an independent copy.
// Thread safety: none. Concurrent Forward calls on one model are safe only while nothing
// changes its weights; everything else needs external synchronization.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/config.h"

namespace torch::nn {
class Module;
}  // namespace torch::nn

namespace rl::model {

class KvCache;
class TransformerImpl;
struct TensorParallel;

at::ScalarType ScalarTypeOf(DType d);

// Routing replay for a mixture of experts (R3): the experts every token used in each sparse
// layer, recorded while generating and replayed while training, so that the trainer's logits
// come from the experts that sampled the tokens. Routes of tokens [B, T] are [B, T, S, k] int64,
// S = config().SparseLayerCount(), k = experts per token. A dense model has S = 0.
struct Routes {
  // Experts to use: undefined routes every token freely; an entry (b, t, s) of k distinct experts
  // in [0, E) is used as the token's choice in sparse layer s, one of k -1s routes it freely there.
  // A replayed token's weights are its router's softmax at those experts (renormalized when the
  // config says norm_topk_prob), so the router still learns.
  at::Tensor replay;
  // Set to the experts each router picks itself (its top k), [B, T, S, k] int64 on the CPU: those
  // used wherever nothing is replayed; where something is, how far the router agrees with it.
  at::Tensor* record = nullptr;
};

// Named tensors in a fixed order: a state dict, or the contents of a safetensors file.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

class Transformer {
 public:
  // A model with weights drawn from a generator seeded by `seed` (same seed, same weights; the
  // global torch RNG is not touched), computing in `dtype`. Config if the config is invalid.
  static Result<Transformer> Create(const ModelConfig& config, uint64_t seed,
                                    DType dtype = DType::kF32);
  // Rank tp.rank's shard, under tensor parallelism (tensor_parallel.h), of the model that
  // Create(config, seed, dtype) makes. Config when the model does not split tp.size ways.
  static Result<Transformer> Create(const ModelConfig& config, uint64_t seed, DType dtype,
                                    const TensorParallel& tp);

  // This model's shard for rank tp.rank. REQUIRES: this model is whole (tensor_parallel().size
  // == 1). The shard copies the weights it holds; no communication.
  Result<Transformer> Shard(const TensorParallel& tp) const;

  const ModelConfig& config() const;
  const TensorParallel& tensor_parallel() const;
  DType dtype() const;  // of the parameters and of the computation
  c10::Device device() const;  // of the parameters and of the computation
  // Moves the parameters (and the tables derived from the config) to `device`. Internal on a
  // failure (out of device memory); the model is then unusable.
  Status To(const c10::Device& device);
  // Converts the parameters to `dtype` (what Create's dtype does). Internal on a failure.
  Status ToDType(DType dtype);

  // tokens [B, T] int64 with 1 <= T <= config().context() and ids in [0, vocab) -> logits
  // [B, T, V] float32, positions 0..T-1. Records gradients when grad mode is on (the default).
  // Sequences of different lengths go in one batch right-padded with any valid id: attention is
  // causal, so padding after a sequence never changes its logits; ignore the padded positions.
  // InvalidArgument for bad tokens or routes.
  Result<at::Tensor> Forward(const at::Tensor& tokens, const Routes& routes = {}) const;

  // Incremental decoding. Row b of tokens [B, T] is appended to cache slot slots[b] at positions
  // length(slot) .. length(slot)+T-1, and the slot's length grows by T. Returns logits [B, T, V]
  // equal (to float rounding) to those a full Forward over the slot's whole sequence gives at
  // those positions. Rows may be at different lengths; slots not named are left untouched.
  // Never records gradients.
  // REQUIRES: *cache is not used concurrently.
  // InvalidArgument when the cache was not made for this model's config and dtype, slots are out
  // of range or repeated, B != slots.size(), or a slot would pass the context; on any error the
  // cache lengths are unchanged.
  // last_only: logits [B, 1, V] of each row's last position only (a prefill's next token).
  // routes: see Routes (what a rollout records for routing replay).
  Result<at::Tensor> ForwardStep(const at::Tensor& tokens, const std::vector<int64_t>& slots,
                                 KvCache* cache, bool last_only = false, const Routes& routes = {}) const;

  // The log-probability of each next token where `mask` [B, T-1] is nonzero, 0 elsewhere:
  // [B, T-1] float32, entry (b, t) = log_softmax(logits(b, t) / temperature)[tokens(b, t+1)]
  // (temperature > 0: that of the sampler, see sampler.h). The LM head runs on the masked
  // positions only (a response's tokens), which is what makes training a model with a vocabulary
  // of 150k tokens affordable. Records gradients in grad mode. routes: see Routes (what a trainer
  // replays); InvalidArgument for bad routes.
  Result<at::Tensor> MaskedTokenLogprobs(const at::Tensor& tokens, const at::Tensor& mask,
                                         double temperature = 1.0, const Routes& routes = {}) const;

  // The hidden states after the final norm, before the LM head: [B, T, hidden_size] in the compute
  // dtype (what a value head reads). Records gradients in grad mode. InvalidArgument for bad tokens
  // or bad routes (Routes: a critic replays the rollout's experts as the policy does).
  Result<at::Tensor> HiddenStates(const at::Tensor& tokens, const Routes& routes = {}) const;

  // The trainable tensors (they share storage with the model), for an optimizer.
  std::vector<at::Tensor> Parameters() const;
  // The state dict: every parameter by name (see transformer_module.h), sharing storage. For a
  // shard, the shard's tensors (ShardTensor of the full ones).
  NamedTensors NamedParameters() const;
  // Copies tensors into the parameters of the same names. Every parameter must be present once,
  // with the same shape; no unknown names. Dtypes are converted. DataError on a mismatch, and
  // then no parameter has changed.
  Status LoadNamedParameters(const NamedTensors& tensors);

  // An independent model with the same config, dtype, device and a copy of the weights.
  Result<Transformer> Clone() const;
  // The same on `device`: Clone(kCPU) of a model on a GPU is a snapshot in host memory (what a
  // checkpoint writes and a weight publisher serves), the device-to-host copy its only cost.
  Result<Transformer> Clone(const c10::Device& device) const;

  // The underlying torch::nn module (include transformer_module.h to use it as TransformerImpl).
  torch::nn::Module& module() const;
  const std::shared_ptr<TransformerImpl>& impl() const { return impl_; }

 private:
  explicit Transformer(std::shared_ptr<TransformerImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<TransformerImpl> impl_;
};

}  // namespace rl::model
