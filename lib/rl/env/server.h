// Server: rl-env serve. One ROUTER socket, one thread that only reads requests and sends
// replies, and a WorkerPool that runs the calls. A request's calls go to the pool at once (they
// run in parallel, up to `workers` at a time); its reply goes when the last one is done, so a
// slow tool never holds up other clients or pings.
//
// Retries: a request carries its sender id and rid (RLP1). A request whose (from, rid) is still
// running only moves its reply to the connection it came on (the client reconnected); one whose
// reply was the sender's last, within keep_replies_ms, gets that reply again. Neither runs its
// calls a second time. A restarted rl-env remembers nothing, so a call whose reply was lost with
// the old process does run again: tools should have no effects beyond their reply.
// Thread safety: Open and Run from one thread; Run returns once `stop` is set.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/env/pool.h"
#include "rl/wire/envelope.h"

namespace rl::env {

struct ServerOptions {
  std::string bind = "tcp://127.0.0.1:5570";
  PoolOptions pool;
  EventLog* events = nullptr;         // serve, tool-failure and stop events; null: none
  size_t max_message = 64u << 20;     // a larger request gets TooLarge
  int64_t keep_replies_ms = 600000;   // how long each sender's last reply is kept for its retries
  int64_t progress_ms = 30000;        // a summary on stderr this often while calls come (0: never)
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> Open(ServerOptions options);
  ~Server();
  const std::string& endpoint() const { return endpoint_; }
  Status Run(const std::atomic<bool>& stop);

 private:
  struct Pending {
    std::string routing;
    Header header;
    std::vector<ToolCall> calls;
    std::vector<ToolResult> results;
    size_t remaining = 0;
    int64_t start_ms = 0;
  };
  struct Kept {
    uint64_t rid = 0;
    std::string body;
    int64_t at_ms = 0;
  };
  using Key = std::pair<std::string, uint64_t>;  // (from, rid); anonymous senders get a fresh rid

  explicit Server(ServerOptions options) : o_(std::move(options)) {}
  void HandleFrames(std::vector<zmq::message_t>& parts);
  void HandleCall(const std::string& routing, const Header& h, std::string_view body);
  void OnResult(const std::shared_ptr<Pending>& p, size_t i, ToolResult r);
  void SendReplies();
  void Send(const std::string& routing, const Header& h, const Status& s, const std::string& body);
  void Housekeeping(int64_t now_ms);

  ServerOptions o_;
  std::string endpoint_;
  std::unique_ptr<zmq::socket_t> socket_;
  int wake_fd_ = -1;  // eventfd: a request's last call is done
  std::map<Key, std::shared_ptr<Pending>> running_;
  std::map<std::string, Kept> kept_;  // by sender
  uint64_t anonymous_ = 0;
  int64_t next_housekeeping_ms_ = 0;

  std::mutex mu_;  // guards finished_ and the stats (workers and the socket thread)
  std::vector<std::shared_ptr<Pending>> finished_;
  uint64_t calls_ = 0, requests_ = 0;
  std::map<std::string, uint64_t> failures_;  // by kind, since the last summary

  std::unique_ptr<WorkerPool> pool_;  // last: destroyed (workers joined) before what they touch
};

}  // namespace rl::env
