// Server: rl-queue's ROUTER loop. One thread owns the socket and the DurableStore.
//
// Each turn of the loop: poll (timeout = the nearest deadline: a lease, a waiting get, a group
// commit), take every waiting request, expire leases, serve parked gets that can now be served,
// then make the turn's records durable as --fsync says and only then send the turn's replies.
// A malformed, unknown or oversized request gets an error reply and the loop goes on.
// Thread safety: Run on one thread; RequestStop from any thread or a signal handler.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "rl/core/event_log.h"
#include "rl/queue/durable.h"
#include "rl/queue/protocol.h"

namespace rl::queue {

struct ServerOptions {
  std::string bind = "tcp://127.0.0.1:5555";
  std::string dir;
  FsyncPolicy fsync = FsyncPolicy::kBatch;
  int fsync_interval_ms = 5;
  size_t max_message = 64u << 20;
  uint64_t snapshot_bytes = 256u << 20;
  std::vector<DeclareRequest> declare;
  EventLog* events = nullptr;  // may be null; must outlive the server
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> Open(ServerOptions options);
  ~Server();
  // Serves until *stop becomes true. Returns an error only when the log cannot be written.
  Status Run(const std::atomic<bool>& stop);
  const std::string& endpoint() const { return endpoint_; }  // the bound endpoint, port resolved

 private:
  struct Waiter {  // a get parked until enough rows are ready or its wait ends
    std::string routing;
    Header header;
    GetRequest req;
    int64_t deadline_ms;
  };
  struct Outgoing {
    std::string routing;
    std::vector<std::string> frames;
  };
  explicit Server(ServerOptions options) : options_(std::move(options)) {}

  void HandleFrames(std::vector<std::string> frames);
  void Dispatch(const std::string& routing, const Message& req);
  Status HandlePut(const std::string& routing, const Message& req);
  Status HandleGet(const std::string& routing, const Message& req);
  Status HandleIndices(const std::string& routing, const Message& req);
  Status HandleMeta(const std::string& routing, const Message& req);
  Status HandleDeclare(const std::string& routing, const Message& req);
  // Tries to serve a get; returns false when it should wait longer.
  bool TryServe(Waiter& w, bool final_attempt);
  void ServeWaiters(bool expire_only);
  void ExpireLeases();
  void Commit(Record r, const std::string& routing, const Header& h);
  void Reply(const std::string& routing, const Header& h, const Status& s, Message body = Message());
  Status SendPending(bool force_sync);
  int PollTimeoutMs() const;

  ServerOptions options_;
  std::unique_ptr<DurableStore> ds_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::string endpoint_;
  std::deque<Waiter> waiters_;
  std::vector<Outgoing> pending_;  // replies waiting for the log to be durable
  int64_t first_unsynced_ms_ = 0;  // when the oldest pending reply was queued (batch policy)
  bool changed_ = false;           // records committed this turn
  uint64_t served_ = 0;
};

}  // namespace rl::queue
