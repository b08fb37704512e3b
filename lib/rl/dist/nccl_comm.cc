#include "rl/dist/nccl_comm.h"

#ifndef RL_WITH_NCCL

namespace rl::dist {

struct NcclComm::State {};
NcclComm::NcclComm(std::unique_ptr<State> state) : state_(std::move(state)) {}
NcclComm::~NcclComm() = default;
bool NcclComm::Built() { return false; }
Result<std::shared_ptr<NcclComm>> NcclComm::Connect(void*, const std::string&, int, int, int, int) {
  return Status::Unavailable("this build has no NCCL (configure with -DRL_WITH_NCCL=ON)");
}
Status NcclComm::AllReduceSum(at::Tensor&) { return Status::Unavailable("no NCCL"); }
Status NcclComm::Broadcast(at::Tensor&, int) { return Status::Unavailable("no NCCL"); }

}  // namespace rl::dist

#else  // RL_WITH_NCCL

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <unistd.h>

#ifdef RL_WITH_CUDA
#include <c10/cuda/CUDAStream.h>
#endif

#include <chrono>
#include <cstring>
#include <exception>
#include <thread>
#include <vector>

#include "rl/dist/peer_error.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 14, 0)
#error "roleflow needs NCCL 2.14 or later (non-blocking communicators, ncclCommInitRankConfig)"
#endif

namespace rl::dist {

struct NcclComm::State {
  ncclComm_t comm = nullptr;
  int rank = 0, size = 1, gpu = 0;
  int timeout_ms = 30000;
  bool broken = false;
  std::string why;  // what broke it
};

namespace {

using Clock = std::chrono::steady_clock;

std::string NcclError(ncclResult_t r, ncclComm_t comm) {
  std::string m = ncclGetErrorString(r);
  const char* last = comm ? ncclGetLastError(comm) : nullptr;
  if (last && *last) m += std::string(" (") + last + ")";
  return m;
}

// Sets the calling thread's GPU for the duration of a call, and puts back the one it had.
class GpuScope {
 public:
  explicit GpuScope(int gpu) {
    if (cudaGetDevice(&before_) != cudaSuccess) before_ = -1;
    ok_ = cudaSetDevice(gpu) == cudaSuccess;
  }
  ~GpuScope() {
    if (before_ >= 0) (void)cudaSetDevice(before_);
  }
  bool ok() const { return ok_; }

 private:
  int before_ = -1;
  bool ok_ = false;
};

Result<ncclDataType_t> NcclType(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kFloat: return ncclFloat32;
    case at::kDouble: return ncclFloat64;
    case at::kHalf: return ncclFloat16;
    case at::kBFloat16: return ncclBfloat16;
    case at::kLong: return ncclInt64;
    case at::kInt: return ncclInt32;
    case at::kChar: return ncclInt8;
    case at::kByte: return ncclUint8;
    default: return Status::InvalidArgument(std::string("nccl: no NCCL type for ") + c10::toString(t.scalar_type()));
  }
}

cudaStream_t StreamOf(int gpu) {
#ifdef RL_WITH_CUDA
  return c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(gpu)).stream();
#else
  return nullptr;  // no CUDA tensor exists in such a build; the legacy default stream
#endif
}

// "host/uuid" of this rank's GPU: two ranks with the same one would share the GPU.
Result<std::string> GpuIdentity(int gpu) {
  cudaDeviceProp prop{};
  const cudaError_t e = cudaGetDeviceProperties(&prop, gpu);
  if (e != cudaSuccess) {
    return Status::Unavailable("nccl: GPU " + std::to_string(gpu) + ": " + cudaGetErrorString(e));
  }
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::string id = std::string(host) + "/";
  static const char* hex = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    const auto b = static_cast<unsigned char>(prop.uuid.bytes[i]);
    id += hex[b >> 4];
    id += hex[b & 15];
  }
  return id;
}

// c10d's store throws on a timeout or a lost server.
template <typename F>
Status StoreCall(const char* what, F&& f) {
  return CallPeers(std::string("nccl: ") + what, std::forward<F>(f));
}

std::vector<uint8_t> Bytes(const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); }

}  // namespace

NcclComm::NcclComm(std::unique_ptr<State> state) : state_(std::move(state)) {}

NcclComm::~NcclComm() {
  // Abort, not Destroy: destroying waits for the peers' share of outstanding work, and a role
  // that shuts down because a peer died must not hang here.
  if (state_ && state_->comm) {
    GpuScope scope(state_->gpu);
    (void)ncclCommAbort(state_->comm);
  }
}

bool NcclComm::Built() { return true; }

Result<std::shared_ptr<NcclComm>> NcclComm::Connect(void* c10d_store, const std::string& prefix, int rank, int size,
                                                    int gpu, int timeout_ms) {
  auto* store = static_cast<c10d::Store*>(c10d_store);
  if (size < 1 || rank < 0 || rank >= size || gpu < 0 || timeout_ms < 1) {
    return Status::InvalidArgument("nccl: bad rank, size, GPU or timeout");
  }
  GpuScope scope(gpu);
  if (!scope.ok()) return Status::Unavailable("nccl: cannot use GPU " + std::to_string(gpu));
  // Every rank's GPU, before NCCL sees them: NCCL refuses two ranks on one GPU, and says so only
  // once the communicator is half made.
  RL_ASSIGN_OR_RETURN(std::string mine, GpuIdentity(gpu));
  std::vector<std::string> gpus(static_cast<size_t>(size));
  RL_RETURN_IF_ERROR(StoreCall("exchanging GPUs", [&] {
    store->set(prefix + "/gpu/" + std::to_string(rank), Bytes(mine));
    for (int r = 0; r < size; ++r) {
      const std::vector<uint8_t> v = store->get(prefix + "/gpu/" + std::to_string(r));
      gpus[static_cast<size_t>(r)].assign(v.begin(), v.end());
    }
  }));
  for (int a = 0; a < size; ++a) {
    for (int b = a + 1; b < size; ++b) {
      if (gpus[static_cast<size_t>(a)] == gpus[static_cast<size_t>(b)]) {
        return Status::Conflict("nccl: ranks " + std::to_string(a) + " and " + std::to_string(b) + " share GPU " +
                                gpus[static_cast<size_t>(a)]);
      }
    }
  }
  ncclUniqueId id{};
  if (rank == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) return Status::Unavailable("nccl: ncclGetUniqueId: " + NcclError(r, nullptr));
  }
  RL_RETURN_IF_ERROR(StoreCall("exchanging the NCCL id", [&] {
    const std::string key = prefix + "/id";
    if (rank == 0) {
      store->set(key, std::vector<uint8_t>(reinterpret_cast<uint8_t*>(&id), reinterpret_cast<uint8_t*>(&id) + sizeof id));
    } else {
      const std::vector<uint8_t> v = store->get(key);
      if (v.size() != sizeof id) throw std::runtime_error("the NCCL id in the store has the wrong size");
      std::memcpy(&id, v.data(), sizeof id);
    }
  }));
  auto state = std::make_unique<State>();
  state->rank = rank;
  state->size = size;
  state->gpu = gpu;
  state->timeout_ms = timeout_ms;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  auto fail = [&](const std::string& why) {
    if (state->comm) (void)ncclCommAbort(state->comm);
    state->comm = nullptr;
    return Status::Unavailable("nccl: forming the communicator: " + why);
  };
  ncclResult_t r = ncclCommInitRankConfig(&state->comm, size, id, rank, &config);
  if ((r != ncclSuccess && r != ncclInProgress) || !state->comm) return fail(NcclError(r, state->comm));
  // Non-blocking: the communicator forms in the background; wait for it, bounded.
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    ncclResult_t async = ncclInProgress;
    r = ncclCommGetAsyncError(state->comm, &async);
    if (r != ncclSuccess) return fail(NcclError(r, state->comm));
    if (async == ncclSuccess) break;
    if (async != ncclInProgress) return fail(NcclError(async, state->comm));
    if (Clock::now() > deadline) return fail("the ranks did not all come within " + std::to_string(timeout_ms) + " ms");
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return std::shared_ptr<NcclComm>(new NcclComm(std::move(state)));
}

namespace {

// Waits for a queued collective: its enqueueing (a non-blocking communicator may return
// ncclInProgress), then the stream. Aborts the communicator on an error or at the deadline.
Status Finish(ncclComm_t& comm, ncclResult_t queued, cudaStream_t stream, int timeout_ms, const char* what,
              bool* broken, std::string* why) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  auto fail = [&](const std::string& m) {
    (void)ncclCommAbort(comm);  // also ends the kernel that waits for a dead peer
    comm = nullptr;
    *broken = true;
    *why = std::string(what) + ": " + m;
    return Status::Unavailable("nccl: " + *why);
  };
  ncclResult_t r = queued;
  for (;;) {
    if (r != ncclSuccess && r != ncclInProgress) return fail(NcclError(r, comm));
    ncclResult_t async = ncclSuccess;
    const ncclResult_t got = ncclCommGetAsyncError(comm, &async);
    if (got != ncclSuccess) return fail(NcclError(got, comm));
    if (async != ncclSuccess && async != ncclInProgress) return fail(NcclError(async, comm));
    if (async == ncclSuccess) {
      const cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return Status::OK();
      if (e != cudaErrorNotReady) return fail(cudaGetErrorString(e));
    }
    if (Clock::now() > deadline) {
      return fail("a peer did not take part within " + std::to_string(timeout_ms) + " ms (dead or hung)");
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    r = ncclSuccess;
  }
}

// One collective: checks that the communicator still works and that t is contiguous on its GPU
// and of a type NCCL has, queues it (enqueue(data, count, type, stream)) and waits for it.
template <typename Enqueue>
Status Collective(const char* what, at::Tensor& t, ncclComm_t& comm, int gpu, int timeout_ms, bool* broken,
                  std::string* why, Enqueue&& enqueue) {
  if (*broken) return Status::Unavailable("nccl: broken by an earlier failure (" + *why + ")");
  if (!t.is_cuda() || t.get_device() != gpu || !t.is_contiguous()) {
    return Status::InvalidArgument(std::string("nccl: ") + what + " of a tensor that is not contiguous on GPU " +
                                   std::to_string(gpu));
  }
  RL_ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(t));
  GpuScope scope(gpu);
  cudaStream_t stream = StreamOf(gpu);
  const ncclResult_t r = enqueue(t.data_ptr(), static_cast<size_t>(t.numel()), type, stream);
  return Finish(comm, r, stream, timeout_ms, what, broken, why);
}

}  // namespace

Status NcclComm::AllReduceSum(at::Tensor& t) {
  State& s = *state_;
  return Collective("all-reduce", t, s.comm, s.gpu, s.timeout_ms, &s.broken, &s.why,
                    [&](void* p, size_t n, ncclDataType_t type, cudaStream_t stream) {
                      return ncclAllReduce(p, p, n, type, ncclSum, s.comm, stream);
                    });
}

Status NcclComm::Broadcast(at::Tensor& t, int root) {
  State& s = *state_;
  if (root < 0 || root >= s.size) return Status::InvalidArgument("nccl: bad root");
  return Collective("broadcast", t, s.comm, s.gpu, s.timeout_ms, &s.broken, &s.why,
                    [&](void* p, size_t n, ncclDataType_t type, cudaStream_t stream) {
                      return ncclBroadcast(p, p, n, type, root, s.comm, stream);
                    });
}

}  // namespace rl::dist

#endif  // RL_WITH_NCCL
