// Client: one DEALER socket that sends a request and waits for its reply, the Lazy Pirate way.
// When no reply comes within the attempt timeout, it closes the socket, waits (doubling from
// backoff_min to backoff_max), reconnects and sends the same request again with the same rid, so
// the server applies it once (exactly-once effect). It gives up after `give_up_s` seconds with
// Unavailable. A reply with a non-OK status becomes that Status.
// It does not wait for the timeout when ZeroMQ says the connection broke: a socket monitor
// reports the disconnection and ZeroMQ's own reconnection (a handshake with the restarted
// server), and the request still waiting is sent again at once, same rid, so a role waiting on
// a server killed and restarted goes on a reconnect interval (100 ms) after the server is back.
// Thread safety: one Client per thread.
#pragma once

#include <zmq.hpp>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/wire/envelope.h"

namespace rl {

// The process-wide ZeroMQ context (one I/O thread: roles share 2 cores).
zmq::context_t& ZmqContext();

// A fresh sender id: hostname, pid and 64 random bits, unique across restarts.
std::string NewSenderId(const std::string& prefix);

struct ClientOptions {
  std::string endpoint;
  std::string sender;              // empty: NewSenderId("client")
  int attempt_timeout_ms = 3000;   // per attempt, before a server-side wait is added
  int backoff_min_ms = 100;
  int backoff_max_ms = 32000;
  double give_up_s = 60;           // total; 0 or less retries forever
  // A role's stop flag (may be null). Once it is true, a call waiting on the server (a waiting get,
  // server_wait_ms > 0) gives up within 100 ms with Timeout "stopped": a role that holds nothing
  // while it waits for work need not wait the rest of the wait to stop. Rows the server may still
  // lease to the abandoned get come back to the role's successor at once (by holder) or when their
  // lease expires.
  const std::atomic<bool>* stop = nullptr;
};

class Client {
 public:
  explicit Client(ClientOptions options);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Sends `body` (a msgpack map) and `blobs` under a new rid; waits for the reply. `server_wait_ms`
  // is how long the server may hold the request (a blocking get) on top of the attempt timeout.
  Result<Message> Call(Op op, std::string body, std::vector<std::string> blobs = {}, int64_t server_wait_ms = 0);
  // The same with a request id the caller chose. A process that restarts with the same sender
  // id and repeats a request under the same rid gets the first effect's reply (the server keeps
  // each sender's last mutation across its own restarts): this is how a restarted role makes a
  // write it may or may not have made before it died happen exactly once.
  Result<Message> CallWithRid(uint64_t rid, Op op, std::string body, std::vector<std::string> blobs = {},
                              int64_t server_wait_ms = 0);
  // Call with a body the caller may use again once no one else holds it (use_count() == 1):
  // a large body is sent from it without a copy, and the socket holds it until sent.
  Result<Message> CallShared(Op op, std::shared_ptr<const std::string> body, int64_t server_wait_ms = 0);
  // Call, with the reply read where it arrived: its body and blobs view the received frames
  // (no copy of them; a large get reply is megabytes).
  Result<MessageView> CallView(Op op, std::string body, std::vector<std::string> blobs = {},
                               int64_t server_wait_ms = 0);

  const std::string& sender() const { return options_.sender; }
  const std::string& endpoint() const { return options_.endpoint; }
  uint64_t retries() const { return retries_; }
  // Requests sent again at once because the connection broke and came back (in retries() too).
  uint64_t resends() const { return resends_; }

 private:
  void Reconnect();
  // Reads one event from the monitor: *lost on a disconnection, *back on a handshake after one.
  void ReadMonitorEvent(bool* back);
  // Sends the request, retrying with the same rid, until a reply with an OK status comes.
  Result<MessageView> Exchange(uint64_t rid, Op op, std::shared_ptr<const std::string> body,
                               std::vector<std::string> blobs, int64_t server_wait_ms);
  // One attempt: send the frames and wait up to timeout_ms for the reply with `rid`. Large frames
  // are sent from their strings without a copy; the socket holds a reference until it is done.
  // *resend: the attempt ended because the connection broke and is back (send again at once).
  // stoppable: it ends when options_.stop turns true (a waiting call).
  Result<MessageView> Attempt(const std::vector<std::shared_ptr<const std::string>>& frames, uint64_t rid,
                              int64_t timeout_ms, bool* resend, bool stoppable = false);

  ClientOptions options_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::unique_ptr<zmq::socket_t> monitor_;  // PAIR: socket_'s connection events
  bool lost_ = false;                       // the connection broke since the request was sent
  Status unusable_ = Status::OK();          // the endpoint could not be connected to at all
  uint64_t next_rid_ = 1;
  uint64_t next_seq_ = 1;
  uint64_t retries_ = 0;
  uint64_t resends_ = 0;
};

}  // namespace rl
