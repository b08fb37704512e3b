// Puller::PullFrom and the same-host way: map the source's sealed memfd and check it in place.
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/weights/chunk_crc.h"
#include "rl/weights/puller.h"

namespace rl::weights {

Status Puller::PullFrom(const std::string& endpoint, const PullOptions& o, Target* t, PullReport* r) {
  Client& client = ClientFor(endpoint, o.request_ms);
  RL_ASSIGN_OR_RETURN(Message reply, client.Call(kOpOpen, EncodeOpenRequest(t->offer.version)));
  RL_ASSIGN_OR_RETURN(OpenGrant g, DecodeOpenReply(reply));
  if (g.offer.version != t->offer.version || g.offer.digest != t->offer.digest) {
    (void)client.Call(kOpClose, EncodeCloseRequest(g.lease, false));
    return Status::NotFound("the source now serves version " + std::to_string(g.offer.version));
  }
  Status s = Status::Unavailable("no shared memory");
  if (g.shm && g.host == HostName() && context_->shm_allowed()) {
    s = PullMapped(endpoint, o, g, t, r);
    if (!s.ok() && (s.code() == Code::kNotFound || s.code() == Code::kProtocol || s.code() == Code::kIOError)) {
      spdlog::debug("{}: {}; asking for sends instead", endpoint, s.message());
      s = PullTagged(endpoint, o, g, t, r);
    }
  } else {
    s = PullTagged(endpoint, o, g, t, r);
  }
  // A stalled or dead source would not answer: let its lease expire instead of waiting.
  if (s.ok() || s.code() == Code::kCorruption || s.code() == Code::kNotFound) {
    (void)client.Call(kOpClose, EncodeCloseRequest(g.lease, false));
  }
  return s;
}

namespace {

// Checks every chunk of a mapped bundle on `threads` threads (this one among them), taking
// chunks in order from a shared counter. The first bad chunk, or Unavailable on *stop.
Status CheckInParallel(const ChunkTable& table, const char* base, size_t threads, const std::atomic<bool>* stop,
                       size_t* bad_chunk) {
  std::atomic<size_t> next{0};
  std::atomic<size_t> bad{SIZE_MAX};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < table.chunks();) {
      if (bad.load() != SIZE_MAX || (stop && stop->load())) return;
      if (ChunkCrc(base + table.ChunkOffset(i), table.ChunkLength(i)) != table.crcs[i]) {
        size_t none = SIZE_MAX;
        bad.compare_exchange_strong(none, i);
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t k = 1; k < threads; ++k) helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
  if (stop && stop->load()) return Status::Unavailable("stopped");
  *bad_chunk = bad.load();
  return Status::OK();
}

}  // namespace

Status Puller::PullMapped(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, Target* t,
                          PullReport* r) {
  const ChunkTable& table = t->offer.table;
  RL_ASSIGN_OR_RETURN(std::shared_ptr<SharedBytes> shared,
                      SharedBytes::Open(static_cast<int>(g.pid), static_cast<int>(g.fd), t->offer.version, table.size));
  if (!o.on_chunk) {
    // The memfd is sealed: a chunk that fails its CRC will fail again. The source is left.
    size_t threads = std::min<size_t>(std::max<uint32_t>(o.verify_threads, 1), std::max<size_t>(table.chunks(), 1));
    size_t bad = SIZE_MAX;
    RL_RETURN_IF_ERROR(CheckInParallel(table, shared->data(), threads, o.stop, &bad));
    if (bad != SIZE_MAX) {
      spdlog::warn("chunk {} of version {} mapped from {} fails its CRC-32C", bad, t->offer.version, endpoint);
      r->refetched++;
      return Status::Corruption("chunk " + std::to_string(bad) + " of the source's memory is corrupt");
    }
  } else {
    RL_RETURN_IF_ERROR(CheckWithHook(endpoint, o, g, shared->data(), t, r));
  }
  // Checked whole, and sealed: the bundle is the mapping itself.
  t->mapped = std::move(shared);
  t->held.assign(table.chunks(), true);
  t->missing = 0;
  r->source = endpoint;
  return Status::OK();
}

Status Puller::CheckWithHook(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, const char* base,
                             Target* t, PullReport* r) {
  const ChunkTable& table = t->offer.table;
  Client& client = ClientFor(endpoint, o.request_ms);
  int64_t last_renew = MonoMillis();
  std::string scratch;  // the hook may write, and the mapping is read-only: it gets a copy
  int bad = 0;
  for (size_t i = 0; i < table.chunks(); ++i) {
    size_t len = table.ChunkLength(i);
    while (true) {
      scratch.assign(base + table.ChunkOffset(i), len);
      o.on_chunk(i, scratch.data(), len);
      if (ChunkCrc(scratch.data(), len) == table.crcs[i]) break;
      spdlog::warn("chunk {} of version {} from {} fails its CRC-32C; fetching it again", i, t->offer.version,
                   endpoint);
      r->refetched++;
      if (++bad > o.max_bad_chunks) return Status::Corruption(std::to_string(bad) + " corrupt chunks from this source");
    }
    if (o.stop && o.stop->load()) return Status::Unavailable("stopped");
    if (MonoMillis() - last_renew > static_cast<int64_t>(g.lease_ms) / 3) {
      last_renew = MonoMillis();
      // The mapping does not need the source, but the lease is how it counts its pullers.
      RL_RETURN_IF_ERROR(client.Call(kOpClose, EncodeCloseRequest(g.lease, true)).status().WithContext("renew lease"));
    }
  }
  return Status::OK();
}

}  // namespace rl::weights
