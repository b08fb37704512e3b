#include "rl/dist/group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <netdb.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <utility>

#include "rl/dist/nccl_comm.h"
#include "rl/dist/peer_error.h"
#include "rl/dist/sync_all_reduce.h"
#include "rl/model/torch_guard.h"

namespace rl::dist {

struct Group::State {
  c10::intrusive_ptr<c10d::Store> store;  // the root store (no prefix), shared with subgroups
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> idle_pg;  // GroupOptions::idle_timeout_ms; may be null
  GroupOptions options;
  // The Gloo group of a call given `timeout_ms` (Broadcast, AllGather).
  c10d::ProcessGroupGloo& For(int64_t timeout_ms) {
    return timeout_ms > options.timeout_ms && idle_pg ? *idle_pg : *pg;
  }
  std::shared_ptr<SyncAllReduce> tp_sum;  // made by the first TensorParallel(), then reused
  std::shared_ptr<NcclComm> nccl;         // for tensors on options.gpu, where there is one
  std::map<int, std::shared_ptr<State>> tp_groups;  // TensorParallelGroup's, by degree
};

namespace {

// c10d reports a dead or hung peer with exceptions (c10::Error, std::runtime_error from Gloo).
template <typename F>
Status Guard(const char* what, F&& f) {
  return CallPeers(std::string("process group: ") + what, std::forward<F>(f));
}

Status ParseEndpoint(const std::string& endpoint, std::string* host, uint16_t* port) {
  const size_t colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Status::InvalidArgument("process group: endpoint '" + endpoint + "' is not HOST:PORT");
  }
  const std::string digits = endpoint.substr(colon + 1);
  if (digits.empty() || digits.size() > 5 || digits.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(digits) < 1 || std::stoi(digits) > 65535) {
    return Status::InvalidArgument("process group: endpoint '" + endpoint + "' has a bad port");
  }
  *host = endpoint.substr(0, colon);
  *port = static_cast<uint16_t>(std::stoi(digits));
  return Status::OK();
}

// A group whose store is on the loopback address lives on one machine: its ranks listen there.
bool IsLoopback(const std::string& host) { return host == "127.0.0.1" || host == "localhost"; }

Result<c10::intrusive_ptr<c10d::ProcessGroupGloo>> MakeGloo(
    const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix, int rank, int size,
    const GroupOptions& o) {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  RL_RETURN_IF_ERROR(Guard("join", [&] {
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->timeout = std::chrono::milliseconds(o.timeout_ms);
    opts->threads = o.threads;
    // Loopback for a group on one machine; otherwise the address this host's name resolves to.
    std::string host;
    uint16_t port = 0;
    (void)ParseEndpoint(o.endpoint, &host, &port);
    opts->devices.push_back(IsLoopback(host) ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
    pg = c10::make_intrusive<c10d::ProcessGroupGloo>(
        c10::make_intrusive<c10d::PrefixStore>(prefix, store), rank, size, opts);
  }));
  return pg;
}

// Every rank of a group must hold a GPU or none: a GPU rank's collectives of GPU tensors take NCCL
// (or host staging) where a CPU rank's take Gloo, and the two would wait for each other until the
// timeout. Each rank says which through the store; InvalidArgument on every rank where they differ.
Status AgreeOnDevices(c10d::Store* store, c10d::ProcessGroupGloo* pg, const GroupOptions& o) {
  std::string mixed;
  RL_RETURN_IF_ERROR(Guard("comparing devices", [&] {
    const std::string prefix = o.name + "/device/";
    store->set(prefix + std::to_string(o.rank), std::vector<uint8_t>{o.gpu >= 0 ? uint8_t{1} : uint8_t{0}});
    for (int r = 0; r < o.size && mixed.empty(); ++r) {
      const std::vector<uint8_t> v = store->get(prefix + std::to_string(r));
      const bool gpu = v.size() == 1 && v[0] == 1;
      if (gpu != (o.gpu >= 0)) {
        mixed = "rank " + std::to_string(gpu ? r : o.rank) + " computes on a GPU and rank " +
                std::to_string(gpu ? o.rank : r) + " on the CPU";
      }
    }
    // On a mix every rank finds it and fails the Join; the barrier keeps rank 0, whose failing Join
    // takes the store down, until the others have read what they need (else they would report a
    // lost store, Unavailable, instead of the mix).
    if (!mixed.empty()) pg->barrier()->wait();
  }));
  if (mixed.empty()) return Status::OK();
  return Status::InvalidArgument("process group '" + o.name + "': " + mixed +
                                 " (give every rank the same kind of --device)");
}

// The NCCL communicator of a group whose ranks hold GPUs, where the build has NCCL: a collective
// of every member. Without one, GPU tensors are staged through host memory (Staged below).
// `o` is the group's own (its name, rank and size); null: staged.
Result<std::shared_ptr<NcclComm>> ConnectGpu(c10d::Store* store, const GroupOptions& o) {
  if (o.gpu < 0) return std::shared_ptr<NcclComm>();
  if (!NcclComm::Built()) {
    if (o.rank == 0) spdlog::info("group '{}': GPU tensors go through host memory (this build has no NCCL)", o.name);
    return std::shared_ptr<NcclComm>();
  }
  auto comm = NcclComm::Connect(store, o.name + "/nccl", o.rank, o.size, o.gpu, o.timeout_ms);
  if (comm.ok()) return std::move(*comm);
  if (comm.status().code() == Code::kConflict) {  // ranks share a GPU: NCCL cannot, host memory can
    if (o.rank == 0) spdlog::warn("group '{}': {}; GPU tensors go through host memory", o.name, comm.status().message());
    return std::shared_ptr<NcclComm>();
  }
  return Status::Unavailable("process group: " + comm.status().message());
}

// A collective `f` of a tensor on a GPU through host memory: a host copy (16-bit floats as
// float32, which c10d's Gloo takes and which holds their sums), f, and back.
at::Tensor HostCopyForGloo(const at::Tensor& t) {
  const bool narrow = t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kHalf;
  return t.to(at::kCPU, narrow ? at::kFloat : t.scalar_type(), /*non_blocking=*/false, /*copy=*/true);
}

template <typename F>
Status Staged(at::Tensor& t, F&& f) {
  at::Tensor host = HostCopyForGloo(t);
  RL_RETURN_IF_ERROR(f(host));
  t.copy_(host);
  return Status::OK();
}

}  // namespace

struct Rendezvous::State {
  c10::intrusive_ptr<c10d::Store> store;
};

Result<Rendezvous> Rendezvous::Open(const std::string& endpoint, bool host_it, int timeout_ms) {
  std::string host;
  uint16_t port = 0;
  RL_RETURN_IF_ERROR(ParseEndpoint(endpoint, &host, &port));
  auto state = std::make_shared<State>();
  RL_RETURN_IF_ERROR(Guard("rendezvous", [&] {
    c10d::TCPStoreOptions so;
    so.port = port;
    so.isServer = host_it;
    so.waitWorkers = false;
    so.timeout = std::chrono::milliseconds(std::max(1, timeout_ms));
    state->store = c10::make_intrusive<c10d::TCPStore>(host, so);
  }));
  return Rendezvous(std::move(state));
}

bool Rendezvous::Listening(const std::string& endpoint, int timeout_ms) {
  std::string host;
  uint16_t port = 0;
  if (!ParseEndpoint(endpoint, &host, &port).ok()) return false;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return false;
  bool listening = false;
  for (addrinfo* a = found; a != nullptr && !listening; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      listening = true;
    } else if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int error = 0;
      socklen_t len = sizeof error;
      listening = ::poll(&p, 1, std::max(1, timeout_ms)) == 1 &&
                  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 && error == 0;
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return listening;
}

Status Rendezvous::Set(const std::string& key, const std::string& value) {
  return Guard("rendezvous", [&] { state_->store->set(key, std::vector<uint8_t>(value.begin(), value.end())); });
}

Result<std::optional<std::string>> Rendezvous::Find(const std::string& key) {
  std::optional<std::string> value;
  RL_RETURN_IF_ERROR(Guard("rendezvous", [&] {
    if (!state_->store->check({key})) return;
    const std::vector<uint8_t> v = state_->store->get(key);
    value.emplace(v.begin(), v.end());
  }));
  return value;
}

Status Rendezvous::Delete(const std::string& key) {
  return Guard("rendezvous", [&] { state_->store->deleteKey(key); });
}

namespace {

Status CheckGroupOptions(const GroupOptions& o) {
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size) {
    return Status::InvalidArgument("process group: rank " + std::to_string(o.rank) +
                                   " outside [0, " + std::to_string(o.size) + ")");
  }
  if (o.timeout_ms < 1 || o.threads < 1 || o.name.empty()) {
    return Status::InvalidArgument("process group: timeout, threads and name must be set");
  }
  std::string host;
  uint16_t port = 0;
  return ParseEndpoint(o.endpoint, &host, &port);
}

}  // namespace

Result<Group> Group::Join(const GroupOptions& o) {
  RL_RETURN_IF_ERROR(CheckGroupOptions(o));
  RL_ASSIGN_OR_RETURN(Rendezvous rendezvous, Rendezvous::Open(o.endpoint, o.rank == 0, o.timeout_ms));
  return Join(o, rendezvous);
}

Result<Group> Group::Join(const GroupOptions& o, const Rendezvous& rendezvous) {
  RL_RETURN_IF_ERROR(CheckGroupOptions(o));
  auto state = std::make_shared<State>();
  state->options = o;
  state->store = rendezvous.state_->store;
  RL_ASSIGN_OR_RETURN(state->pg, MakeGloo(state->store, o.name, o.rank, o.size, o));
  RL_RETURN_IF_ERROR(AgreeOnDevices(state->store.get(), state->pg.get(), o));
  RL_ASSIGN_OR_RETURN(state->nccl, ConnectGpu(state->store.get(), o));
  if (o.idle_timeout_ms > o.timeout_ms && o.size > 1) {
    GroupOptions idle = o;
    idle.timeout_ms = o.idle_timeout_ms;
    RL_ASSIGN_OR_RETURN(state->idle_pg, MakeGloo(state->store, o.name + "/idle", o.rank, o.size, idle));
  }
  return Group(std::move(state));
}

int Group::rank() const { return state_->pg->getRank(); }
int Group::size() const { return state_->pg->getSize(); }
bool Group::OnNccl() const { return state_->nccl != nullptr; }

Status Group::AllReduceSum(at::Tensor& t) {
  if (t.is_cuda()) {
    if (state_->nccl) return state_->nccl->AllReduceSum(t).WithContext("process group");
    return Staged(t, [&](at::Tensor& host) { return AllReduceSum(host); });
  }
  return Guard("all-reduce", [&] {
    std::vector<at::Tensor> v{t};
    state_->pg->allreduce(v)->wait();
  });
}

Status Group::Broadcast(at::Tensor& t, int root, int64_t timeout_ms) {
  if (root < 0 || root >= size()) return Status::InvalidArgument("process group: bad root");
  if (t.is_cuda()) {
    if (state_->nccl && timeout_ms <= 0) return state_->nccl->Broadcast(t, root).WithContext("process group");
    return Staged(t, [&](at::Tensor& host) { return Broadcast(host, root, timeout_ms); });
  }
  return Guard("broadcast", [&] {
    std::vector<at::Tensor> v{t};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    if (timeout_ms > 0) opts.timeout = std::chrono::milliseconds(timeout_ms);
    state_->For(timeout_ms).broadcast(v, opts)->wait();
  });
}

Status Group::AllGather(const at::Tensor& t, std::vector<at::Tensor>* out, int64_t timeout_ms) {
  if (t.is_cuda()) {  // control-sized everywhere it is used: through host memory
    RL_RETURN_IF_ERROR(AllGather(HostCopyForGloo(t), out, timeout_ms));
    for (at::Tensor& o : *out) o = o.to(t.device(), t.scalar_type());
    return Status::OK();
  }
  return Guard("all-gather", [&] {
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (int r = 0; r < size(); ++r) outputs[0].push_back(at::empty_like(t));
    std::vector<at::Tensor> in{t};
    c10d::AllgatherOptions opts;
    if (timeout_ms > 0) opts.timeout = std::chrono::milliseconds(timeout_ms);
    state_->For(timeout_ms).allgather(outputs, in, opts)->wait();
    *out = std::move(outputs[0]);
  });
}

Status Group::Barrier() {
  return Guard("barrier", [&] { state_->pg->barrier()->wait(); });
}

Result<Group> Group::Subgroup(const std::vector<int>& ranks, const std::string& name) const {
  int me = -1;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] < 0 || ranks[i] >= size() || (i > 0 && ranks[i] <= ranks[i - 1])) {
      return Status::InvalidArgument("process group: subgroup ranks must ascend within the group");
    }
    if (ranks[i] == rank()) me = static_cast<int>(i);
  }
  if (me < 0) return Status::InvalidArgument("process group: subgroup without this rank");
  auto state = std::make_shared<State>(*state_);
  state->tp_sum = nullptr;  // the subgroup's own
  state->nccl = nullptr;
  state->idle_pg.reset();  // the parent's connects other ranks; a subgroup waits its timeout
  state->tp_groups.clear();
  state->options.name = state_->options.name + "/" + name;
  state->options.rank = me;
  state->options.size = static_cast<int>(ranks.size());
  RL_ASSIGN_OR_RETURN(state->pg, MakeGloo(state_->store, state->options.name, me,
                                          static_cast<int>(ranks.size()), state->options));
  RL_ASSIGN_OR_RETURN(state->nccl, ConnectGpu(state_->store.get(), state->options));
  return Group(std::move(state));
}

Result<Group> Group::TensorParallelGroup(int degree) {
  if (degree < 1 || size() % degree != 0) {
    return Status::InvalidArgument("process group: tensor-parallel degree " + std::to_string(degree) +
                                   " does not divide " + std::to_string(size()));
  }
  if (degree == size()) {
    RL_RETURN_IF_ERROR(TensorParallel().status());
    return *this;
  }
  auto found = state_->tp_groups.find(degree);
  if (found != state_->tp_groups.end()) return Group(found->second);
  const int k = rank() / degree;
  std::vector<int> ranks;
  for (int r = k * degree; r < (k + 1) * degree; ++r) ranks.push_back(r);
  RL_ASSIGN_OR_RETURN(Group g, Subgroup(ranks, "tp" + std::to_string(degree) + "-" + std::to_string(k)));
  RL_RETURN_IF_ERROR(g.TensorParallel().status());
  state_->tp_groups[degree] = g.state_;
  return g;
}

Result<model::TensorParallel> Group::TensorParallel() {
  if (!state_->tp_sum && size() > 1) {
    std::string host;
    uint16_t port = 0;
    RL_RETURN_IF_ERROR(ParseEndpoint(state_->options.endpoint, &host, &port));
    RL_ASSIGN_OR_RETURN(state_->tp_sum,
                        SyncAllReduce::Connect(state_->store.get(), state_->options.name + "/tp", rank(), size(),
                                               state_->options.timeout_ms, IsLoopback(host)));
  }
  model::TensorParallel tp;
  tp.rank = rank();
  tp.size = size();
  std::shared_ptr<SyncAllReduce> sum = state_->tp_sum;
  std::shared_ptr<NcclComm> nccl = state_->nccl;
  tp.all_reduce = [sum, nccl](at::Tensor& t) {
    if (t.is_cuda() && nccl) {
      at::Tensor c = t.contiguous();
      if (Status s = nccl->AllReduceSum(c); !s.ok()) throw model::PeerLost("tensor-parallel all-reduce: " + s.message());
      if (c.data_ptr() != t.data_ptr()) t.copy_(c);
      return;
    }
    try {
      if (t.is_cuda()) {  // no NCCL: through host memory
        at::Tensor host = t.to(at::kCPU, at::kFloat, false, true);
        sum->Sum(host);
        t.copy_(host);
      } else {
        sum->Sum(t);
      }
    } catch (const std::exception& e) {
      throw model::PeerLost("tensor-parallel all-reduce: " + FirstLine(e));
    }
  };
  return tp;
}

}  // namespace rl::dist
