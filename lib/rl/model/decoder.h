// Decoder: the two ways Generate turns token sequences into next-token logits — through a
// KvCache (CacheDecoder) or by a full forward pass every step (FullDecoder).
//
// Internal to lib/rl/model. Both keep one sequence per slot:
//   Start(slots, prompts): the slots' sequences become the prompts; returns the logits that
//     follow each prompt, [n, V], row i for slots[i].
//   Step(slots, tokens): appends tokens[i] to slots[i]'s sequence; returns the logits that
//     follow, [n, V].
// Slots not named are untouched. With `routes` (routing replay, transformer.h's Routes), each
// call also sets (*routes)[i] to the [T_i, S, k] int64 experts of the tokens it fed for row i:
// the whole prompt for Start, the one token for Step.
// Thread safety: none.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/kv_cache.h"
#include "rl/model/transformer.h"

namespace rl::model {

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual Result<at::Tensor> Start(const std::vector<int64_t>& slots,
                                   const std::vector<const std::vector<int64_t>*>& prompts,
                                   std::vector<at::Tensor>* routes = nullptr) = 0;
  virtual Result<at::Tensor> Step(const std::vector<int64_t>& slots, const std::vector<int64_t>& tokens,
                                  std::vector<at::Tensor>* routes = nullptr) = 0;
  int64_t forward_calls() const { return forward_calls_; }

 protected:
  int64_t forward_calls_ = 0;
};

// REQUIRES: *model outlives the decoder.
Result<std::unique_ptr<Decoder>> NewCacheDecoder(const Transformer* model, int64_t slots);
Result<std::unique_ptr<Decoder>> NewFullDecoder(const Transformer* model, int64_t slots);

}  // namespace rl::model
