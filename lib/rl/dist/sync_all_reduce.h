// SyncAllReduce: the all-reduce of the tensor-parallel layers, on a Gloo context of its own whose
// pairs run in synchronous mode (the calling thread sends and receives; no other thread in the
// way), connected through the group's c10d store.
//
// Why not c10d's ProcessGroupGloo for this one collective: it hands every call to a worker thread,
// which hands the transfers to the transport's event-loop thread. On 2 cores a 768-float
// all-reduce between two processes took 0.4-0.9 ms that way against 35 us on Gloo's ring in
// synchronous mode (same machine, same run), and a decoder layer makes two of them per step: with
// c10d, tensor parallelism of two ranks was slower than one rank alone. Everything else (the
// rendezvous, the control and migration collectives) stays on c10d.
// Thread safety: one thread at a time; every rank calls in the same order with the same sizes
// (the model's layers do).
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>

#include "rl/core/status.h"

namespace c10d {
class Store;
}
namespace c10 {
template <class T, class NullType>
class intrusive_ptr;
}

namespace rl::dist {

class SyncAllReduce {
 public:
  // Connects `size` ranks through `store` under the key prefix `prefix`, listening on 127.0.0.1
  // when `loopback` (a group on one machine), else on the address this host's name resolves to.
  // Unavailable when the ranks do not all come within timeout_ms.
  static Result<std::shared_ptr<SyncAllReduce>> Connect(void* c10d_store, const std::string& prefix,
                                                        int rank, int size, int timeout_ms, bool loopback);
  ~SyncAllReduce();
  // Sums t over the ranks in place (any floating dtype; reduced in float32). Throws
  // std::exception when a peer is lost.
  void Sum(at::Tensor& t);

 private:
  struct State;
  explicit SyncAllReduce(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace rl::dist
