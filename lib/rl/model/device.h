// Where a role's model lives: "cpu", "cuda" (the first GPU) or "cuda:N" (--device of every role
// that holds a model). Parsing is separate from checking, so that a typo is a usage error (64)
// and a GPU this machine or this build lacks is Unavailable (69) with a line that says which.
//
// On a GPU the model, its KV cache and the sampling run there; what leaves the device is what a
// role must read on the host: the picked ids and their log-probabilities, loss sums, and the
// weights a trainer publishes or checkpoints (copied to host memory first, pinned where the build
// has CUDA so that the copy is a DMA).
// Thread safety: stateless.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

#include "rl/core/status.h"

namespace rl::model {

// "cpu", "cuda" or "cuda:N" (N >= 0) -> the device; InvalidArgument otherwise.
Result<c10::Device> ParseDevice(const std::string& name);
// "cpu", "cuda:0", ...: what ParseDevice reads back.
std::string DeviceName(const c10::Device& device);
// OK for the CPU; for a GPU, Unavailable when libtorch was built without CUDA, no GPU is visible,
// or the index is past the last one.
Status CheckDevice(const c10::Device& device);
// ParseDevice then CheckDevice, the error prefixed with "--device NAME: ".
Result<c10::Device> OpenDevice(const std::string& name);
// OpenDevice for one of several ranks on a machine. "cuda" (no index) means cuda:(local_rank mod
// the GPUs this process sees), so that ranks started alike take a GPU each: cuda:local_rank where
// there are enough; cuda:0 where the process sees one (a supervisor that hands each rank its GPU
// through CUDA_VISIBLE_DEVICES); ranks spread over the GPUs, sharing them, where there are more
// ranks than GPUs. Any other name, and local_rank < 1, is OpenDevice's.
Result<c10::Device> OpenRankDevice(const std::string& name, int local_rank);

// A host copy of t that stays valid after t changes: a clone on the CPU, a copy into pinned host
// memory from a GPU (the one blocking part of a snapshot; the caller writes it out at leisure).
at::Tensor HostCopy(const at::Tensor& t);

// Waits for the work queued on a GPU (no-op on the CPU): timings of device work need it.
void Synchronize(const c10::Device& device);

// The most bytes libtorch's caching allocator had handed out on a GPU since the last reset (what
// torch.cuda.max_memory_allocated reports in Python); nullopt on the CPU or without CUDA.
std::optional<int64_t> PeakDeviceBytes(const c10::Device& device);
void ResetPeakDeviceBytes(const c10::Device& device);

}  // namespace rl::model
