// MappedBytes: bundle bytes that live in a UCX memory region. A puller receives a bundle straight
// into one (private memory: cheap to fill); a source serves UCX-allocated shared memory of its
// own context as it is and copies anything else into such memory once (source.cc).
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
