#include "rl/model/kv_cache.h"

#include <ATen/ATen.h>

#include "rl/model/tensor_parallel.h"
#include "rl/model/torch_guard.h"
#include "rl/model/transformer.h"

namespace rl::model {

Result<KvCache> KvCache::Create(const ModelConfig& config, int64_t slots, DType dtype,
                                int64_t tp_size, c10::Device device) {
  RL_RETURN_IF_ERROR(config.Validate());
  RL_RETURN_IF_ERROR(CheckTensorParallel(config, tp_size));
  if (slots < 1) {
    return Status::InvalidArgument("kv cache: slots must be >= 1, got " + std::to_string(slots));
  }
  KvCache cache;
  cache.capacity_ = config.context();
  cache.n_kv_heads_ = config.kv_heads() / tp_size;
  cache.head_dim_ = config.head_width();
  cache.dtype_ = dtype;
  cache.device_ = device;
  cache.lengths_.assign(static_cast<size_t>(slots), 0);
  RL_RETURN_IF_ERROR(TorchGuard("kv cache: allocate", [&]() -> Status {
    const std::vector<int64_t> shape = {slots, cache.n_kv_heads_, cache.capacity_, cache.head_dim_};
    for (int64_t l = 0; l < config.num_hidden_layers; ++l) {
      const at::TensorOptions options = at::TensorOptions().dtype(ScalarTypeOf(dtype)).device(device);
      cache.keys_.push_back(at::zeros(shape, options));
      cache.values_.push_back(at::zeros(shape, options));
    }
    return Status::OK();
  }));
  return cache;
}

Status KvCache::Reset(int64_t slot) {
  if (slot < 0 || slot >= slots()) {
    return Status::InvalidArgument("kv cache: slot " + std::to_string(slot) + " is outside [0, " +
                                   std::to_string(slots()) + ")");
  }
  lengths_[static_cast<size_t>(slot)] = 0;
  return Status::OK();
}

void KvCache::ResetAll() {
  for (int64_t& n : lengths_) n = 0;
}

}  // namespace rl::model
