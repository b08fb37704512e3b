#include "rl/dist/sync_all_reduce.h"

#include <ATen/ATen.h>
#ifdef RL_GLOO_IN_LIBTORCH
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#else
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <map>
#include <vector>

#include "rl/dist/peer_error.h"

namespace rl::dist {

#ifdef RL_GLOO_IN_LIBTORCH
// This libtorch holds a Gloo of its own and exports its symbols (PyTorch's wheels do): a second
// Gloo linked beside it would share those names and the loader would mix the two. So this build
// sums through c10d's ProcessGroupGloo, libtorch's own Gloo, and pays its worker threads' latency
// (the header says how much) instead of a ring in synchronous mode.
struct SyncAllReduce::State {
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
};

Result<std::shared_ptr<SyncAllReduce>> SyncAllReduce::Connect(void* c10d_store, const std::string& prefix,
                                                              int rank, int size, int timeout_ms, bool loopback) {
  auto state = std::make_unique<State>();
  try {
    auto store = c10::intrusive_ptr<c10d::Store>::unsafe_reclaim_from_nonowning(static_cast<c10d::Store*>(c10d_store));
    auto opts = c10d::ProcessGroupGloo::Options::create();
    opts->timeout = std::chrono::milliseconds(timeout_ms);
    opts->threads = 1;
    opts->devices.push_back(loopback ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                     : c10d::ProcessGroupGloo::createDefaultDevice());
    state->pg = c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix, store),
                                                            rank, size, opts);
  } catch (const std::exception& e) {
    return Status::Unavailable("tensor-parallel all-reduce: connect: " + FirstLine(e));
  }
  return std::shared_ptr<SyncAllReduce>(new SyncAllReduce(std::move(state)));
}

SyncAllReduce::SyncAllReduce(std::unique_ptr<State> state) : state_(std::move(state)) {}
SyncAllReduce::~SyncAllReduce() = default;

void SyncAllReduce::Sum(at::Tensor& t) {
  if (t.numel() == 0) return;
  std::vector<at::Tensor> sum{t.to(at::kFloat).contiguous()};  // t itself where it is float32 already
  state_->pg->allreduce(sum)->wait();
  if (!sum[0].is_same(t)) t.copy_(sum[0]);
}

#else  // Debian's Gloo, which Debian's libtorch links too
namespace {

// Gloo's rendezvous over a c10d store (the group's TCPStore).
class StoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit StoreAdapter(c10d::Store* store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, std::vector<uint8_t>(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    const std::vector<uint8_t> v = store_->get(key);
    return std::vector<char>(v.begin(), v.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout);
  }

 private:
  c10d::Store* store_;
};

}  // namespace

struct SyncAllReduce::State {
  std::shared_ptr<gloo::rendezvous::Context> context;
  // A ring per power-of-two capacity, bound to a float32 staging buffer of that size whose tail
  // past the tensor stays zero on every rank (so its sum does too): at most ~30 rings, however
  // many prompt lengths come. Every rank makes them in the same order (the model's calls are the
  // same everywhere), so their slots agree.
  struct Ring {
    std::vector<float> buffer;
    std::unique_ptr<gloo::AllreduceRing<float>> ring;
  };
  std::map<int64_t, Ring> rings;
};

SyncAllReduce::SyncAllReduce(std::unique_ptr<State> state) : state_(std::move(state)) {}
SyncAllReduce::~SyncAllReduce() = default;

Result<std::shared_ptr<SyncAllReduce>> SyncAllReduce::Connect(void* c10d_store, const std::string& prefix,
                                                              int rank, int size, int timeout_ms, bool loopback) {
  auto state = std::make_unique<State>();
  try {
    StoreAdapter adapter(static_cast<c10d::Store*>(c10d_store));
    gloo::rendezvous::PrefixStore store(prefix, adapter);
    std::string host = "127.0.0.1";
    if (!loopback) {
      char name[256] = {};
      if (gethostname(name, sizeof name - 1) != 0) throw std::runtime_error("gethostname failed");
      host = name;
    }
    gloo::transport::tcp::attr attr(host.c_str());
    auto device = gloo::transport::tcp::CreateDevice(attr);
    state->context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    state->context->setTimeout(std::chrono::milliseconds(timeout_ms));
    state->context->connectFullMesh(store, device);
    for (int r = 0; r < size; ++r) {
      if (r != rank) state->context->getPair(r)->setSync(/*sync=*/true, /*busyPoll=*/false);
    }
  } catch (const std::exception& e) {
    return Status::Unavailable("tensor-parallel all-reduce: connect: " + FirstLine(e));
  }
  return std::shared_ptr<SyncAllReduce>(new SyncAllReduce(std::move(state)));
}

void SyncAllReduce::Sum(at::Tensor& t) {
  const int64_t n = t.numel();
  if (n == 0) return;
  int64_t capacity = 1024;
  while (capacity < n) capacity *= 2;
  auto it = state_->rings.find(capacity);
  if (it == state_->rings.end()) {
    State::Ring ring;
    ring.buffer.assign(static_cast<size_t>(capacity), 0.0f);
    ring.ring = std::make_unique<gloo::AllreduceRing<float>>(
        state_->context, std::vector<float*>{ring.buffer.data()}, static_cast<int>(capacity));
    it = state_->rings.emplace(capacity, std::move(ring)).first;
  }
  float* data = it->second.buffer.data();
  at::Tensor staging = at::from_blob(data, t.sizes(), at::kFloat);
  staging.copy_(t);
  it->second.ring->run();
  t.copy_(staging);
}
#endif  // RL_GLOO_IN_LIBTORCH

}  // namespace rl::dist
