// Puller::PullFrom and the same-host way: map the source's shared memory and copy the chunks.
#include <cstring>

#include "rl/core/clock.h"
#include "rl/core/crc32c.h"
#include "rl/core/log.h"
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
    if (!s.ok() && s.code() == Code::kNotFound) {
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

bool Puller::Accept(const std::string& endpoint, const PullOptions& o, size_t chunk, Target* t, PullReport* r) {
  const ChunkTable& table = t->offer.table;
  char* data = t->memory->data() + table.ChunkOffset(chunk);
  size_t len = table.ChunkLength(chunk);
  if (o.on_chunk) o.on_chunk(chunk, data, len);
  if (Crc32c(data, len) != table.crcs[chunk]) {
    spdlog::warn("chunk {} of version {} from {} fails its CRC-32C; fetching it again", chunk, t->offer.version,
                 endpoint);
    r->refetched++;
    return false;
  }
  if (!t->held[chunk]) {
    t->held[chunk] = true;
    t->missing--;
  }
  r->source = endpoint;
  return true;
}

Status Puller::PullMapped(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, Target* t,
                          PullReport* r) {
  // Released in reverse: the mapping (rkey) before its endpoint.
  RL_ASSIGN_OR_RETURN(auto ep, UcxEndpoint::Connect(worker_.get(), g.worker_address, false));
  RL_ASSIGN_OR_RETURN(auto rkey, UcxRkey::Unpack(*ep, g.rkey));
  void* base = nullptr;
  ucs_status_t us = ucp_rkey_ptr(rkey->get(), g.remote_addr, &base);
  if (us != UCS_OK) return Status::NotFound(std::string("cannot map the source's memory: ") + ucs_status_string(us));
  const ChunkTable& table = t->offer.table;
  Prefault(base, table.size, false);
  Client& client = ClientFor(endpoint, o.request_ms);
  int64_t last_renew = MonoMillis();
  int bad = 0;
  for (size_t i = 0; i < table.chunks(); ++i) {
    while (!t->held[i]) {
      std::memcpy(t->memory->data() + table.ChunkOffset(i), static_cast<const char*>(base) + table.ChunkOffset(i),
                  table.ChunkLength(i));
      if (!Accept(endpoint, o, i, t, r) && ++bad > o.max_bad_chunks) {
        return Status::Corruption(std::to_string(bad) + " corrupt chunks from this source");
      }
    }
    if (o.stop && o.stop->load()) return Status::Unavailable("stopped");
    if (MonoMillis() - last_renew > static_cast<int64_t>(g.lease_ms) / 3) {
      last_renew = MonoMillis();
      // The copy does not need the source, but its lease keeps the memory from being reused.
      RL_RETURN_IF_ERROR(client.Call(kOpClose, EncodeCloseRequest(g.lease, true)).status().WithContext("renew lease"));
    }
  }
  return Status::OK();
}

}  // namespace rl::weights
