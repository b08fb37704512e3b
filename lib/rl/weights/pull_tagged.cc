// Puller::PullTagged: the way over tcp. Receives are posted for a window of chunks, then the
// source is asked (protocol.h "send") to send exactly those, each under its own tag. Every
// receive is completed, cancelled, or set aside with its worker before PullTagged returns.
// The worker and the target memory are kept from one pull to the next (puller.h).
#include <algorithm>
#include <memory>
#include <vector>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/weights/puller.h"

namespace rl::weights {
namespace {
constexpr int kCancelWaitMs = 200;  // for UCX to complete cancelled receives

bool AnyBusy(const Puller::Slot* slots, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (slots[i].busy && !slots[i].done.done) return true;
  }
  return false;
}

}  // namespace

Status Puller::PullTagged(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, Target* t,
                          PullReport* r) {
  // Receives a stalled source never completes cannot be cancelled once matched: they are
  // buried with the worker (see Stuck), and the next pull gets a new one.
  if (!worker_) {
    RL_ASSIGN_OR_RETURN(worker_, UcxWorker::Create(context_));
  }
  if (!t->memory) {
    RL_ASSIGN_OR_RETURN(t->memory, TargetMemory(t->offer.table.size));
  }
  UcxWorker* worker = worker_.get();
  size_t n = std::max<uint32_t>(o.inflight, 1);
  std::unique_ptr<Slot[]> slots(new Slot[n]);
  Status s = ReceiveChunks(endpoint, o, g, worker, slots.get(), n, t, r);
  for (size_t i = 0; i < n; ++i) {
    if (slots[i].busy && !slots[i].done.done && slots[i].request) ucp_request_cancel(worker->get(), slots[i].request);
  }
  int64_t deadline = MonoMillis() + kCancelWaitMs;
  while (AnyBusy(slots.get(), n) && MonoMillis() < deadline) worker->Progress();
  if (AnyBusy(slots.get(), n)) {
    spdlog::warn("{}: receives still matched to a stalled send; setting them aside with their worker", endpoint);
    stuck_.push_back(Stuck{std::move(worker_), std::move(slots), t->memory});
    t->other_writers = true;
  }
  return s;
}

Result<std::shared_ptr<UcxMemory>> Puller::TargetMemory(size_t size) {
  auto idle = [](const std::shared_ptr<UcxMemory>& m) { return m.use_count() == 1; };
  for (const auto& m : pool_) {
    if (idle(m) && m->size() == size) return m;
  }
  RL_ASSIGN_OR_RETURN(std::shared_ptr<UcxMemory> fresh, UcxMemory::AllocatePrivate(context_, size));
  // Room for it: a free place, else the place of an idle buffer of another size.
  if (pool_.size() < kPooledBuffers) {
    pool_.push_back(fresh);
  } else {
    auto it = std::find_if(pool_.begin(), pool_.end(), idle);
    if (it != pool_.end()) *it = fresh;
  }
  return fresh;
}


Status Puller::ReceiveChunks(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, UcxWorker* worker,
                             Slot* slots, size_t n, Target* t, PullReport* r) {
  Client& client = ClientFor(endpoint, o.request_ms);
  const ChunkTable& table = t->offer.table;
  std::vector<size_t> queue;  // missing chunks, taken from the back
  for (size_t i = table.chunks(); i-- > 0;) {
    if (!t->held[i]) queue.push_back(i);
  }
  int bad = 0;
  int64_t last_progress = MonoMillis(), last_request = last_progress;
  while (true) {
    // Refill when half the window is free, so a request asks for several chunks at once.
    size_t free_slots = 0;
    for (size_t s = 0; s < n; ++s) free_slots += !slots[s].busy;
    if (!queue.empty() && (free_slots * 2 >= n || free_slots == n)) {
      SendRequest req;
      req.lease = g.lease;
      req.address = worker->address();
      for (size_t s = 0; s < n && !queue.empty(); ++s) {
        Slot& slot = slots[s];
        if (slot.busy) continue;
        slot = Slot();
        slot.chunk = queue.back();
        slot.busy = true;
        queue.pop_back();
        ucp_request_param_t p{};
        p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_MEMH;
        p.cb.recv = &UcxOnRecvComplete;
        p.user_data = &slot.done;
        p.memh = t->memory->memh();
        ucs_status_ptr_t ret = ucp_tag_recv_nbx(worker->get(), t->memory->data() + table.ChunkOffset(slot.chunk),
                                                table.ChunkLength(slot.chunk), ChunkTag(g.lease, slot.chunk),
                                                ~ucp_tag_t{0}, &p);
        if (ret != nullptr && !UCS_PTR_IS_ERR(ret)) slot.request = ret;
        UcxTrack(ret, &slot.done);
        req.chunks.push_back(slot.chunk);
      }
      std::string body;
      std::vector<std::string> blobs = EncodeSendRequest(req, &body);
      RL_RETURN_IF_ERROR(client.Call(kOpSend, std::move(body), std::move(blobs)).status().WithContext("send request"));
      last_request = MonoMillis();
    }
    unsigned events = worker->Progress();
    bool any_busy = false;
    for (size_t s = 0; s < n; ++s) {
      Slot& slot = slots[s];
      if (!slot.busy) continue;
      if (!slot.done.done) {
        any_busy = true;
        continue;
      }
      slot.busy = false;
      last_progress = MonoMillis();
      if (slot.done.status != UCS_OK) {
        queue.push_back(slot.chunk);
        return UcxStatus(slot.done.status, "receive of chunk " + std::to_string(slot.chunk));
      }
      if (!Accept(endpoint, o, slot.chunk, t, r)) {
        queue.push_back(slot.chunk);
        if (++bad > o.max_bad_chunks) return Status::Corruption(std::to_string(bad) + " corrupt chunks from this source");
      }
    }
    if (queue.empty() && !any_busy) return Status::OK();
    int64_t now = MonoMillis();
    if (now - last_progress > o.stall_ms) {
      return Status::Timeout("stalled: no chunk for " + std::to_string(o.stall_ms) + " ms");
    }
    if (o.stop && o.stop->load()) return Status::Unavailable("stopped");
    if (now - last_request > static_cast<int64_t>(g.lease_ms) / 3) {
      last_request = now;
      RL_RETURN_IF_ERROR(client.Call(kOpClose, EncodeCloseRequest(g.lease, true)).status().WithContext("renew lease"));
    }
    if (events == 0 && any_busy) worker->Wait(10);
  }
}

}  // namespace rl::weights
