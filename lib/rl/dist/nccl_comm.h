// NcclComm: an NCCL communicator for tensors on GPUs, what a Group (group.h) uses for collectives
// of tensors on this rank's GPU when the build has RL_WITH_NCCL and every rank holds a GPU of
// its own. Without it (or where ranks share a GPU) a Group stages such tensors through host
// memory and Gloo.
//
// Why NCCL itself and not c10d's ProcessGroupNCCL: ProcessGroupNCCL exists only in a CUDA
// libtorch and its header wants that build's exact NCCL, so no CPU machine could even compile
// ours; and its watchdog ends the whole process when a collective times out
// (TORCH_NCCL_ASYNC_ERROR_HANDLING), where a roleflow role reports a lost peer and re-forms its
// group. This needs only nccl.h and the CUDA runtime: it compiles and links wherever the CUDA
// toolkit is installed, GPU or not.
//
// Failure: the communicator is non-blocking (ncclConfig_t.blocking = 0). Every call waits by
// polling, for at most the group's timeout: on an NCCL error (a peer's connection dropped) or at
// the timeout (a peer hangs) it aborts the communicator (ncclCommAbort, which also ends the
// kernels still waiting) and returns Unavailable. From then on every call is Unavailable: the
// group must be re-formed, as with Gloo.
// Stream: collectives are queued on the stream torch's kernels use on that GPU (its current
// stream where the build has CUDA), so they follow the kernels that produced the tensor, and a
// call returns once the collective finished: the caller reads the result next.
// Thread safety: one thread at a time; every rank calls in the same order with the same sizes.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "rl/core/status.h"

namespace rl::dist {

class NcclComm {
 public:
  // Whether this build has NCCL (RL_WITH_NCCL); Connect is Unavailable without it.
  static bool Built();

  // Forms the communicator of `size` ranks, each on its GPU `gpu` (a CUDA device index), through
  // `c10d_store` (a c10d::Store*, the group's) under the key prefix `prefix`: rank 0 makes the
  // NCCL id and sets it there. Conflict (and no communicator) when two ranks are on one GPU of
  // one machine, which NCCL refuses: the caller stages through host memory instead; Unavailable
  // when the ranks do not all come within timeout_ms or NCCL fails.
  static Result<std::shared_ptr<NcclComm>> Connect(void* c10d_store, const std::string& prefix, int rank, int size,
                                                   int gpu, int timeout_ms);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  // In place, t contiguous on this rank's GPU. InvalidArgument for a tensor elsewhere or of a
  // dtype NCCL lacks; Unavailable once the communicator failed.
  Status AllReduceSum(at::Tensor& t);
  Status Broadcast(at::Tensor& t, int root);

 private:
  struct State;
  explicit NcclComm(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace rl::dist
