#include "rl/weights/puller.h"

#include <algorithm>
#include <random>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/weights/chunk_crc.h"
#include "rl/weights/mapped_bytes.h"

namespace rl::weights {
namespace {
constexpr int kBackoffMaxMs = 2000;

bool Same(const Offer& a, const Offer& b) { return a.version == b.version && a.digest == b.digest; }
}  // namespace

Result<std::unique_ptr<Puller>> Puller::Create(std::shared_ptr<UcxContext> context, const std::string& id) {
  std::unique_ptr<Puller> p(new Puller(std::move(context), id));
  RL_ASSIGN_OR_RETURN(p->worker_, UcxWorker::Create(p->context_));
  return p;
}

Puller::~Puller() {
  for (Stuck& s : stuck_) {
    (void)s.worker.release();
    (void)s.slots.release();
    (void)new std::shared_ptr<UcxMemory>(std::move(s.memory));
  }
}

Client& Puller::ClientFor(const std::string& endpoint, int request_ms) {
  auto& c = clients_[endpoint];
  if (!c) {
    ClientOptions o;
    o.endpoint = endpoint;
    o.sender = NewSenderId(id_.empty() ? "puller" : id_);
    o.attempt_timeout_ms = request_ms;
    o.give_up_s = request_ms / 1000.0;  // one attempt: a silent source is skipped, not waited for
    o.backoff_min_ms = 10;
    c = std::make_unique<Client>(o);
  }
  return *c;
}

std::vector<SourceOffer> Puller::Survey(const std::vector<std::string>& sources, int request_ms) {
  std::vector<SourceOffer> out;
  for (const std::string& ep : sources) {
    SourceOffer so;
    so.endpoint = ep;
    auto reply = ClientFor(ep, request_ms).Call(kOpInfo, EmptyBody());
    if (!reply.ok()) {
      so.status = reply.status();
    } else {
      auto offer = DecodeInfoReply(*reply);
      so.status = offer.status();
      if (offer.ok()) so.offer = *offer;
    }
    out.push_back(std::move(so));
  }
  return out;
}

Result<Bundle> Puller::Pull(const PullOptions& o, PullReport* report) {
  if (o.sources.empty()) return Status::InvalidArgument("no weight sources to pull from");
  PullReport local;
  PullReport* r = report ? report : &local;
  *r = PullReport();
  int64_t start = MonoMillis();
  int64_t deadline = start + static_cast<int64_t>(o.give_up_s * 1000);
  std::mt19937_64 rng(std::random_device{}());
  Target t;
  bool have_target = false;
  int backoff = std::max(1, o.retry_ms);
  Status last = Status::Unavailable("no source answered");
  while (true) {
    if (o.stop && o.stop->load()) return Status::Unavailable("stopped while pulling weights");
    std::vector<SourceOffer> offers = Survey(o.sources, o.request_ms);
    const Offer* newest = nullptr;
    for (const auto& so : offers) {
      if (!so.status.ok()) {
        last = so.status.WithContext(so.endpoint);
      } else if (so.offer.version >= o.min_version && (!newest || so.offer.version > newest->version)) {
        newest = &so.offer;
      }
    }
    bool target_held = false;
    for (const auto& so : offers) target_held |= have_target && so.status.ok() && Same(so.offer, t.offer);
    if (newest && !target_held) {
      if (have_target && t.missing < t.held.size()) {
        spdlog::warn("no source holds version {} any more: dropping {} of its {} chunks, pulling version {}",
                     t.offer.version, t.held.size() - t.missing, t.held.size(), newest->version);
        r->restarts++;
      }
      t = Target();
      t.offer = *newest;
      t.held.assign(t.offer.table.chunks(), false);
      t.missing = t.held.size();
      have_target = true;
    }
    bool gained = false;
    if (have_target) {
      std::vector<const SourceOffer*> holders;
      for (const auto& so : offers) {
        if (so.status.ok() && Same(so.offer, t.offer)) holders.push_back(&so);
      }
      std::shuffle(holders.begin(), holders.end(), rng);  // pullers spread over equally busy sources
      std::stable_sort(holders.begin(), holders.end(), [](const SourceOffer* a, const SourceOffer* b) {
        return a->offer.active < b->offer.active;
      });
      for (const SourceOffer* so : holders) {
        size_t before = t.missing;
        Status s = PullFrom(so->endpoint, o, &t, r);
        gained |= t.missing < before;
        if (t.missing < before) r->sources_used++;
        if (s.ok() && t.missing == 0) break;
        last = s.WithContext(so->endpoint);
        r->failovers++;
        // Busy is the normal way pullers spread over sources; the rest are failures.
        if (s.message().rfind("busy", 0) == 0) {
          spdlog::debug("weights from {}: {}; trying another source", so->endpoint, s.message());
        } else {
          spdlog::warn("weights from {}: {}; trying another source", so->endpoint, s.message());
        }
        if (o.stop && o.stop->load()) break;
      }
      if (t.missing == 0) {
        auto bundle = Finish(&t);
        if (bundle.ok()) {
          r->version = bundle->version;
          r->seconds = (MonoMillis() - start) / 1000.0;
          return bundle;
        }
        last = bundle.status();
        if (last.code() == Code::kDataError) return last;
        spdlog::warn("version {}: {}; fetching again", t.offer.version, last.message());
      }
    } else if (!newest) {
      last = Status::Unavailable("no source holds a version >= " + std::to_string(o.min_version));
    }
    if (MonoMillis() >= deadline) {
      return Status::Unavailable("no complete weights after " + std::to_string(static_cast<int>(o.give_up_s)) +
                                 " s; last: " + last.message());
    }
    if (gained) backoff = std::max(1, o.retry_ms);
    int64_t nap = std::min<int64_t>(backoff, deadline - MonoMillis());
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(nap, 0)));
    backoff = std::min(backoff * 2, kBackoffMaxMs);
  }
}

Result<Bundle> Puller::Finish(Target* t) {
  const ChunkTable& table = t->offer.table;
  if (!t->mapped && t->other_writers) {
    for (size_t i = 0; i < table.chunks(); ++i) {
      if (ChunkCrc(t->memory->data() + table.ChunkOffset(i), table.ChunkLength(i)) != table.crcs[i]) {
        t->held[i] = false;
        t->missing++;
      }
    }
  }
  if (t->missing > 0) return Status::Corruption(std::to_string(t->missing) + " chunks changed after they were checked");
  if (table.Digest() != t->offer.digest) return Status::Corruption("the chunk table does not match the digest");
  Bundle b;
  b.version = t->offer.version;
  b.table = table;
  if (t->mapped) {
    b.bytes = t->mapped;
  } else {
    b.bytes = std::make_shared<MappedBytes>(t->memory);
  }
  if (Status s = CheckSafetensorsFrame(b.data(), b.size()); !s.ok()) {
    // Whole and matching its digest, yet not a weight file: the source serves something else.
    return Status::DataError("version " + std::to_string(b.version) + ": " + s.message());
  }
  *t = Target();
  return b;
}

}  // namespace rl::weights
