// Puller::PullTagged: the way over tcp. Receives are posted for a window of chunks, then the
// source is asked (protocol.h "send") to send exactly those, each under its own tag. Every
// receive is completed, cancelled, or set aside with its worker before PullTagged returns.
// The worker and the target memory are kept from one pull to the next (puller.h). A chunk lands
// through a ChunkLanding, which takes its CRC piece by piece as it is copied in; one whose
// pieces came out of order is checked on another thread while the next ones arrive
// (chunk_verifier.h).
#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/weights/chunk_verifier.h"
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

// One tagged pull from one source: receives posted for a window of the missing chunks, a send
// request for them, and each chunk that arrives checked on a ChunkVerifier while the next ones
// are received. Returns with receives possibly in flight; PullTagged cancels or buries them.
class TaggedReceive {
 public:
  TaggedReceive(const std::string& endpoint, const PullOptions& o, const OpenGrant& g, Client* client,
                UcxWorker* worker, Puller::Slot* slots, size_t n, Puller::Target* t, PullReport* r)
      : endpoint_(endpoint), o_(o), g_(g), client_(*client), worker_(worker), slots_(slots), n_(n), t_(t), r_(r),
        verifier_(&t->offer.table, t->memory->data()) {
    for (size_t i = t->held.size(); i-- > 0;) {
      if (!t->held[i]) queue_.push_back(i);
    }
    last_progress_ = last_request_ = MonoMillis();
  }
  // OK once every missing chunk arrived and passed its check.
  Status Run();
  // After a failed Run: waits for the checks in flight and keeps the chunks that passed, so the
  // next source is asked only for what is still missing.
  void Settle();

 private:
  static constexpr int kWaitMs = 10;  // sleeps between looks at the stall, stop and lease clocks
  // Posts receives into the free slots and asks the source for those chunks.
  Status PostWindow();
  // Hands completed receives to the verifier; *any_busy when receives remain in flight.
  Status Reap(bool* any_busy);
  // Marks the verifier's checked chunks held (Checked).
  Status TakeResults();
  // A chunk's check: held when ok; otherwise queued again, and too many bad ones leave the source.
  Status Checked(size_t chunk, bool ok);

  const std::string& endpoint_;
  const PullOptions& o_;
  const OpenGrant& g_;
  Client& client_;
  UcxWorker* worker_;
  Puller::Slot* slots_;
  size_t n_;
  Puller::Target* t_;
  PullReport* r_;
  std::vector<size_t> queue_;  // missing chunks, taken from the back
  int bad_ = 0;
  int64_t last_progress_ = 0, last_request_ = 0;
  ChunkVerifier verifier_;  // last: it joins before the rest goes
};

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
  // All missing chunks at once, up to a bound that keeps a send request well under the
  // source's 1 MiB message limit (a 1 GB bundle of 4 KiB chunks is 262144 of them).
  constexpr size_t kMaxInflight = 4096;
  size_t n = o.inflight > 0 ? o.inflight : std::clamp<size_t>(t->missing, 1, kMaxInflight);
  std::unique_ptr<Slot[]> slots(new Slot[n]);
  Status s;
  {
    TaggedReceive receive(endpoint, o, g, &ClientFor(endpoint, o.request_ms), worker, slots.get(), n, t, r);
    s = receive.Run();
    if (!s.ok()) receive.Settle();
  }
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
  spdlog::debug("receiving into a new buffer of {} bytes ({} pooled)", size, pool_.size());
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


Status TaggedReceive::Run() {
  while (true) {
    size_t free_slots = 0;
    for (size_t s = 0; s < n_; ++s) free_slots += !slots_[s].busy;
    // Refill when half the window is free, so a request asks for several chunks at once.
    if (!queue_.empty() && (free_slots * 2 >= n_ || free_slots == n_)) RL_RETURN_IF_ERROR(PostWindow());
    unsigned events = worker_->Progress();
    bool any_busy = false;
    RL_RETURN_IF_ERROR(Reap(&any_busy));
    RL_RETURN_IF_ERROR(TakeResults());
    if (queue_.empty() && !any_busy && verifier_.pending() == 0) return Status::OK();
    int64_t now = MonoMillis();
    if (now - last_progress_ > o_.stall_ms) {
      return Status::Timeout("stalled: no chunk for " + std::to_string(o_.stall_ms) + " ms");
    }
    if (o_.stop && o_.stop->load()) return Status::Unavailable("stopped");
    if (now - last_request_ > static_cast<int64_t>(g_.lease_ms) / 3) {
      last_request_ = now;
      RL_RETURN_IF_ERROR(
          client_.Call(kOpClose, EncodeCloseRequest(g_.lease, true)).status().WithContext("renew lease"));
    }
    if (events > 0 || !queue_.empty()) continue;
    if (any_busy) {
      worker_->Wait(kWaitMs);
    } else {
      verifier_.WaitForResult(kWaitMs);
    }
  }
}

void TaggedReceive::Settle() {
  while (verifier_.pending() > 0) {
    verifier_.WaitForResult(kWaitMs);
    (void)TakeResults();
  }
}

Status TaggedReceive::PostWindow() {
  const ChunkTable& table = t_->offer.table;
  SendRequest req;
  req.lease = g_.lease;
  req.address = worker_->address();
  for (size_t s = 0; s < n_ && !queue_.empty(); ++s) {
    Puller::Slot& slot = slots_[s];
    if (slot.busy) continue;
    slot = Puller::Slot();
    slot.chunk = queue_.back();
    slot.busy = true;
    queue_.pop_back();
    ucp_request_param_t p{};
    p.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    p.cb.recv = &UcxOnRecvComplete;
    p.user_data = &slot.done;
    char* dst = t_->memory->data() + table.ChunkOffset(slot.chunk);
    size_t length = table.ChunkLength(slot.chunk);
    void* buffer = dst;
    if (ucp_datatype_t dt = LandingDatatype(); dt != 0) {
      slot.landing.dst = dst;
      slot.landing.length = length;
      buffer = &slot.landing;
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_DATATYPE;
      p.datatype = dt;
    } else {
      p.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
      p.memh = t_->memory->memh();
    }
    ucs_status_ptr_t ret =
        ucp_tag_recv_nbx(worker_->get(), buffer, length, ChunkTag(g_.lease, slot.chunk), ~ucp_tag_t{0}, &p);
    if (ret != nullptr && !UCS_PTR_IS_ERR(ret)) slot.request = ret;
    UcxTrack(ret, &slot.done);
    req.chunks.push_back(slot.chunk);
  }
  std::string body;
  std::vector<std::string> blobs = EncodeSendRequest(req, &body);
  RL_RETURN_IF_ERROR(client_.Call(kOpSend, std::move(body), std::move(blobs)).status().WithContext("send request"));
  last_request_ = MonoMillis();
  return Status::OK();
}

Status TaggedReceive::Reap(bool* any_busy) {
  for (size_t s = 0; s < n_; ++s) {
    Puller::Slot& slot = slots_[s];
    if (!slot.busy) continue;
    if (!slot.done.done) {
      *any_busy = true;
      continue;
    }
    slot.busy = false;
    last_progress_ = MonoMillis();
    if (slot.done.status != UCS_OK) {
      queue_.push_back(slot.chunk);
      return UcxStatus(slot.done.status, "receive of chunk " + std::to_string(slot.chunk));
    }
    const ChunkTable& table = t_->offer.table;
    std::optional<uint32_t> crc = slot.landing.Crc();
    if (o_.on_chunk) {
      // The hook may change the bytes: they are checked in place after it.
      o_.on_chunk(slot.chunk, t_->memory->data() + table.ChunkOffset(slot.chunk), table.ChunkLength(slot.chunk));
      crc.reset();
    }
    if (crc) {
      RL_RETURN_IF_ERROR(Checked(slot.chunk, *crc == table.crcs[slot.chunk]));
    } else {
      verifier_.Submit(slot.chunk);
    }
  }
  return Status::OK();
}

Status TaggedReceive::TakeResults() {
  for (const ChunkVerifier::Result& v : verifier_.Take()) RL_RETURN_IF_ERROR(Checked(v.chunk, v.ok));
  return Status::OK();
}

Status TaggedReceive::Checked(size_t chunk, bool ok) {
  if (!ok) {
    spdlog::warn("chunk {} of version {} from {} fails its CRC-32C; fetching it again", chunk, t_->offer.version,
                 endpoint_);
    r_->refetched++;
    queue_.push_back(chunk);
    if (++bad_ > o_.max_bad_chunks) return Status::Corruption(std::to_string(bad_) + " corrupt chunks from this source");
    return Status::OK();
  }
  if (!t_->held[chunk]) {
    t_->held[chunk] = true;
    t_->missing--;
  }
  r_->source = endpoint_;
  return Status::OK();
}

}  // namespace rl::weights
