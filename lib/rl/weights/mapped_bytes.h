// MappedBytes: bundle bytes that live in a UCX memory region. A puller receives a bundle over tcp
// straight into one (private memory: cheap to fill); a source copies such bytes once into a
// sealed memfd (shared_bytes.h) that pullers on its host can map.
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
