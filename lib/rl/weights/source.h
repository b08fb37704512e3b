// Source: serves the newest weight bundle it holds to pullers (protocol.h). rl-train, rl-relay
// and (optionally) rl-rollout each run one.
//
// The bundle sits in a sealed memfd (shared_bytes.h); a puller on the same host maps it and
// checks it in place, others ask for tagged sends of chunks (puller.h says why). The
// source's thread answers info/open/close on a ZeroMQ ROUTER socket and progresses its UCX worker
// (transports that emulate gets in software need the source's progress), sleeping on both the
// socket and the worker's event fd when there is nothing to do. At most max_pulls leases are held
// at once; a puller that is refused tries another source, so pulls spread over sources.
// The endpoint to a puller's worker is kept for its next lease (a rollout pulls every version
// from the same sources; connecting cost ms a pull), unless a lease ended with sends in flight:
// closing the endpoint is what cancels them.
//
// Thread safety: Publish, current, active and the test hooks may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "rl/core/event_log.h"
#include "rl/weights/bundle.h"
#include "rl/weights/protocol.h"
#include "rl/weights/shared_bytes.h"
#include "rl/weights/ucx.h"

namespace rl::weights {

struct SourceOptions {
  std::string bind = "tcp://127.0.0.1:0";  // ZeroMQ endpoint of the protocol
  uint32_t max_pulls = 4;                  // leases granted at once
  uint32_t lease_ms = 10000;               // a lease not renewed within this ends
  EventLog* events = nullptr;              // may be null; must outlive the source
};

class Source {
 public:
  // Binds the socket and starts the source's thread. `context` may be shared with the caller.
  static Result<std::unique_ptr<Source>> Start(std::shared_ptr<UcxContext> context, SourceOptions options);
  ~Source();  // Stop()

  // Serves `bundle` from now on. Its bytes are copied into a sealed memfd unless they already
  // are (SharedBytes). Conflict when the version is not newer than the current one.
  // The previous version stays mapped until the last lease on it ends.
  Status Publish(const Bundle& bundle);
  std::optional<Bundle> current() const;
  const std::string& endpoint() const { return endpoint_; }  // port resolved
  uint32_t active() const { return active_.load(); }
  uint64_t pulls_served() const { return served_.load(); }

  // Stops the thread and drops every lease; the worker goes with the source's destruction.
  void Stop();
  // Test hook: while paused the thread neither answers nor progresses UCX (a stalled source).
  void SetPaused(bool paused) { paused_ = paused; }

 private:
  // Released in reverse: the registration before the memfd it covers.
  struct Served {
    Bundle bundle;
    std::shared_ptr<const SharedBytes> shared;  // the bundle's bytes
    std::shared_ptr<UcxMemory> memory;          // registered over them
    std::string rkey;
  };
  // A tagged send in flight. UCX may complete a send after its endpoint was closed, so a send
  // that outlives its lease is orphaned and its callback frees it.
  struct Served;
  struct SendOp {
    bool done = false;
    bool orphaned = false;
    std::shared_ptr<Served> pin;  // the memory being sent stays mapped until the send completes
  };
  static void OnSendComplete(void* request, ucs_status_t status, void* user_data);
  // The endpoint goes first (closed, cancelling its sends, when this lease held the last
  // reference), then the sends are freed or orphaned.
  struct Lease {
    std::shared_ptr<Served> served;
    int64_t deadline_ms = 0;
    std::vector<SendOp*> sends;
    std::shared_ptr<UcxEndpoint> ep;  // to the puller, from peers_ or made on its first send request
    std::string peer;                 // the puller's worker address
    Lease() = default;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    bool sending() const;  // a send not completed yet
  };
  Source(std::shared_ptr<UcxContext> c, SourceOptions o) : context_(std::move(c)), options_(std::move(o)) {}

  void Loop();
  void HandleFrames(std::vector<std::string> frames);
  Message Dispatch(const Message& req, Status* status);
  Result<Message> Open(const Message& req);
  Result<Message> Close(const Message& req);
  Result<Message> Send(const Message& req);
  Offer OfferOf(const Served& s) const;
  void ExpireLeases();
  // Ends a lease. Its endpoint stays in peers_ for the puller's next lease only when no send of
  // this one is in flight and the endpoint has not failed.
  std::map<uint64_t, Lease>::iterator EndLease(std::map<uint64_t, Lease>::iterator it);
  Result<std::shared_ptr<UcxEndpoint>> EndpointTo(const std::string& address);

  std::shared_ptr<UcxContext> context_;
  SourceOptions options_;
  std::unique_ptr<UcxWorker> worker_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_;
  std::string host_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::atomic<uint32_t> active_{0};
  std::atomic<uint64_t> served_{0};

  mutable std::mutex mu_;
  std::shared_ptr<Served> current_;  // guarded by mu_

  // Endpoints to pullers' workers by address, kept across leases (the thread's own); at most
  // kMaxPeers, the least recently used dropped first. Declared before leases_, which may hold
  // the same endpoints, so the leases go first.
  static constexpr size_t kMaxPeers = 64;
  struct Peer {
    std::shared_ptr<UcxEndpoint> ep;
    int64_t used_ms = 0;
  };
  std::map<std::string, Peer> peers_;
  std::map<uint64_t, Lease> leases_;  // the thread's own
  uint64_t next_lease_ = 1;
};

}  // namespace rl::weights
