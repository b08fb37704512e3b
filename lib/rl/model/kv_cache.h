// KvCache: the keys and values of past positions, per layer, for a fixed number of slots, so that
// decoding a token costs one position of work instead of a forward pass over the whole sequence.
//
// Design: one slot holds one sequence. Each layer has a key and a value tensor of shape
// [slots, num_key_value_heads, context, head_dim] in the model's compute dtype (grouped-query
// attention: the query heads of a group share their key/value head at attention time, so the
// cache stores only the key/value heads), and each slot has its own length: the number of
// positions written, always a prefix [0, length). Transformer::ForwardStep appends T tokens to a
// chosen set of slots at their own positions (length .. length+T-1), so the rows of one batch can
// be at different lengths, and a query attends only to its own slot's positions <= its own.
// Continuous batching follows: when a sequence finishes, Reset(slot) empties that slot and a
// ForwardStep over just that slot prefills the next prompt, while the other slots keep their
// state and go on decoding in later steps. Data past a slot's length (left by an earlier
// occupant) is masked out of attention, so Reset need not clear it.
//
// Memory: 2 * layers * slots * context * num_key_value_heads * head_dim * sizeof(dtype) bytes.
// Thread safety: none; a cache belongs to one decoding loop. This header includes only the
// ATen tensor type, not torch.h.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/config.h"

namespace rl::model {

class KvCache {
 public:
  // A cache for `slots` sequences of up to config.context() positions, all empty, for a model
  // computing in `dtype`. InvalidArgument if slots < 1; Config if the config is invalid.
  // A rank of a tensor-parallel group of `tp_size` holds num_key_value_heads / tp_size heads.
  // The cache lives on `device`, which must be the model's (Internal when it has no room).
  static Result<KvCache> Create(const ModelConfig& config, int64_t slots,
                                DType dtype = DType::kF32, int64_t tp_size = 1,
                                c10::Device device = c10::Device(c10::kCPU));

  int64_t slots() const { return static_cast<int64_t>(lengths_.size()); }
  int64_t capacity() const { return capacity_; }  // positions per slot (the context)
  int64_t n_layers() const { return static_cast<int64_t>(keys_.size()); }
  int64_t n_kv_heads() const { return n_kv_heads_; }
  int64_t head_dim() const { return head_dim_; }
  DType dtype() const { return dtype_; }
  c10::Device device() const { return device_; }
  // REQUIRES: 0 <= slot < slots().
  int64_t length(int64_t slot) const { return lengths_[static_cast<size_t>(slot)]; }

  // Empties one slot (length 0); InvalidArgument for a slot out of range.
  Status Reset(int64_t slot);
  void ResetAll();

  // For Transformer::ForwardStep. REQUIRES: 0 <= layer < n_layers().
  const at::Tensor& keys(int64_t layer) const { return keys_[static_cast<size_t>(layer)]; }
  const at::Tensor& values(int64_t layer) const { return values_[static_cast<size_t>(layer)]; }
  // Records that `n` more positions of `slot` hold data. REQUIRES: length(slot) + n <= capacity().
  void Advance(int64_t slot, int64_t n) { lengths_[static_cast<size_t>(slot)] += n; }

 private:
  KvCache() = default;
  int64_t capacity_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  DType dtype_ = DType::kF32;
  c10::Device device_ = c10::Device(c10::kCPU);
  std::vector<at::Tensor> keys_, values_;
  std::vector<int64_t> lengths_;
};

}  // namespace rl::model
