// Group: a process group of torch.distributed c10d over Gloo (TCP), the communication that
// tensor-parallel rollouts (and data-parallel trainers) use. No communication code of our own:
// this is a thin handle that turns c10d's exceptions into Status values and gives the model's
// tensor-parallel layers their all-reduce.
//
// Rendezvous: rank 0 hosts a c10d TCPStore at `endpoint`; every rank connects to it and Gloo
// makes a full mesh of TCP connections through it. `name` prefixes every store key, so a group
// that re-forms (after a rank died) takes a fresh name and never reads the old one's keys.
// Subgroups (the tensor-parallel groups of a rollout group, say) are made once over the same
// store and reused.
//
// GPUs: a group whose ranks hold GPUs (GroupOptions::gpu) sends the tensors that live there
// through NCCL where the build has it, and through host memory otherwise; host tensors (the
// control collectives) always take Gloo.
//
// Failure: a collective whose peer died fails (Unavailable) as soon as the connection drops, or
// after `timeout_ms` for a peer that hangs; the group is then broken and must be re-formed.
// Thread safety: a Group may be used from one thread at a time; collectives must be called in the
// same order on every rank.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/tensor_parallel.h"

namespace rl::dist {

struct GroupOptions {
  std::string endpoint;  // host:port of the rendezvous store; rank 0 listens there
  int rank = 0;
  int size = 1;
  std::string name = "rl";  // the store-key prefix of this group (a fresh one per re-forming)
  int timeout_ms = 30000;   // for the rendezvous and for each collective
  // Above timeout_ms: the group also forms a channel whose collectives wait this long, taken by the
  // calls given a timeout above timeout_ms (a follower waiting for its next request). c10d's Gloo
  // group waits its own timeout whatever a call asks (torch 1.13 ignores BroadcastOptions and
  // AllgatherOptions timeouts), so a long wait needs a group of its own. 0: none.
  int idle_timeout_ms = 0;
  int threads = 1;          // Gloo's worker threads (one is enough for a 2-core machine)
  // This rank's GPU (a CUDA device index) when its collectives carry tensors there; -1: none.
  // With a GPU, Join also forms an NCCL communicator (nccl_comm.h) where the build has NCCL and no
  // two ranks share a GPU; otherwise tensors on the GPU go through host memory and Gloo.
  int gpu = -1;
};

// The store a group meets at (a c10d TCPStore that rank 0 hosts at `endpoint`), opened apart from
// any group so that it outlives one: a rollout group that re-forms (reforming_group.h) forms each
// new group over the store of the last, and keeps its own keys there. Every call turns the store's
// exceptions (its server gone, a timeout) into Unavailable.
class Rendezvous {
 public:
  // Rank 0 hosts the store (Unavailable when the port is taken); other ranks connect to it,
  // trying for up to timeout_ms (Unavailable when nobody listens by then). InvalidArgument for
  // an endpoint that is not HOST:PORT.
  static Result<Rendezvous> Open(const std::string& endpoint, bool host, int timeout_ms);
  // Whether something accepts TCP connections at `endpoint` now (one connect, at most timeout_ms):
  // a rank waiting for rank 0 to come back asks this first, as c10d's client logs every attempt.
  static bool Listening(const std::string& endpoint, int timeout_ms);

  Status Set(const std::string& key, const std::string& value);
  // The value of `key`, or nullopt where the store has no such key (never waits for one).
  Result<std::optional<std::string>> Find(const std::string& key);
  Status Delete(const std::string& key);

 private:
  friend class Group;
  struct State;
  explicit Rendezvous(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

class Group {
 public:
  // Connects to (rank 0: hosts) the store and forms the group. InvalidArgument for bad options
  // and where some ranks have a GPU and others none (GroupOptions::gpu); Timeout when the other
  // ranks do not come within timeout_ms; Unavailable when the store cannot be reached or bound.
  static Result<Group> Join(const GroupOptions& options);
  // The same over an open rendezvous (its endpoint, not options.endpoint's, is the store; the
  // endpoint still says whether the ranks listen on the loopback address).
  static Result<Group> Join(const GroupOptions& options, const Rendezvous& rendezvous);

  int rank() const;
  int size() const;
  // Whether this group's GPU tensors go through NCCL (not staged through host memory).
  bool OnNccl() const;

  // Collectives. Every rank gets the same result bits. Unavailable when the group is broken.
  // A tensor on the GPU goes through NCCL where the group has it (OnNccl), else it is copied to
  // host memory (16-bit floats as float32, which c10d's Gloo takes), through Gloo, and back.
  Status AllReduceSum(at::Tensor& t);  // in place; t contiguous
  // In place; same shape and dtype on every rank. timeout_ms above the group's timeout: a call
  // that may wait that long (a follower waiting for its next request), taken on the group's idle
  // channel (GroupOptions::idle_timeout_ms) where it has one, else on the group's own timeout.
  // Every rank must pass alike for the same call (the channels are different connections).
  Status Broadcast(at::Tensor& t, int root, int64_t timeout_ms = 0);
  // out[r] = rank r's `t` (same shape and dtype on every rank). timeout_ms as for Broadcast.
  Status AllGather(const at::Tensor& t, std::vector<at::Tensor>* out, int64_t timeout_ms = 0);
  Status Barrier();

  // A group of the members `ranks` (ascending, of this group), over the same store under
  // name() + "/" + name. Called by the members only; they become ranks 0.. in that order.
  Result<Group> Subgroup(const std::vector<int>& ranks, const std::string& name) const;

  // The tensor-parallel group of `degree` (dividing size()) that holds this rank: ranks
  // [k*degree, (k+1)*degree) for this rank's k, named "tp<degree>-<k>". Made by the first call
  // (a collective of its members, with its TensorParallel() connected too) and kept in this
  // group, so that later calls, and later generation stages, reuse it. degree == size() is this
  // group itself. InvalidArgument for a degree that does not divide size().
  Result<Group> TensorParallelGroup(int degree);

  // The all-reduce the model's tensor-parallel layers call (sync_all_reduce.h: Gloo in
  // synchronous mode; it throws model::PeerLost on a broken group). The first call connects it,
  // a collective: every rank calls this at once; later calls reuse it. Unavailable when the
  // ranks cannot connect.
  Result<model::TensorParallel> TensorParallel();

 private:
  struct State;
  explicit Group(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
};

}  // namespace rl::dist
