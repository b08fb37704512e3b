// MappedBytes: bundle bytes that live in a UCX memory region. A puller receives a bundle straight
// into one, and a source that is handed one from its own context serves it without a copy (a
// relay or a rollout re-serving what it pulled).
// Thread safety: immutable once the bundle is built.
#pragma once

#include <memory>

#include "rl/weights/bundle.h"
#include "rl/weights/ucx.h"

namespace rl::weights {

class MappedBytes : public BundleBytes {
 public:
  explicit MappedBytes(std::shared_ptr<UcxMemory> memory) : memory_(std::move(memory)) {}
  const char* data() const override { return memory_->data(); }
  size_t size() const override { return memory_->size(); }
  const std::shared_ptr<UcxMemory>& memory() const { return memory_; }

 private:
  std::shared_ptr<UcxMemory> memory_;
};

}  // namespace rl::weights
