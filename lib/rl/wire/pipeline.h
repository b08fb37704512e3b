// Pipeline: a client that keeps up to `window` requests in flight on one DEALER socket, so a
// stream of small requests (acks, puts) costs one round trip per window instead of one each.
//
// The server remembers one mutating request per sender id (man/rl-protocol.7, RELIABILITY), so
// the pipeline sends under `window` sender ids, its lanes: lane L's id is the base sender id
// followed by "/L". A lane has at most one request in flight; every request gets a new rid (one
// counter for all lanes, so a rid names one request of the pipeline) and a reply is matched to its
// request by rid. Retries are the wire Client's, for every request still waiting, in submission
// order, each on its own lane with its own rid: when one waits past its attempt timeout, the
// pipeline waits a backoff (100 ms doubling to 32 s), reconnects on a new socket and sends them
// all again; when ZeroMQ reports the connection broke and came back (a server restart), it sends
// them again at once. So each request takes effect once, as with Client, and while the
// connection holds the server carries them out in submission order.
// Results are collected in submission order.
// Thread safety: one Pipeline per thread.
#pragma once

#include <zmq.hpp>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/wire/client.h"
#include "rl/wire/envelope.h"

namespace rl {

class Pipeline {
 public:
  // options as for Client (its give_up_s applies to each request from its first send); window
  // in [1, 1024].
  Pipeline(ClientOptions options, int window);
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  int window() const { return window_; }
  // Requests submitted and not collected yet.
  size_t pending() const { return queue_.size(); }
  bool full() const { return queue_.size() >= static_cast<size_t>(window_); }

  // Sends a request under a new rid on a free lane; `server_wait_ms` as in Client::Call.
  // REQUIRES: !full().
  void Submit(Op op, std::shared_ptr<const std::string> body, std::vector<std::string> blobs = {},
              int64_t server_wait_ms = 0);
  void Submit(Op op, std::string body, std::vector<std::string> blobs = {}, int64_t server_wait_ms = 0);
  // Waits for the reply of the oldest request not collected and returns it, as Client::CallView
  // would (a reply with a non-OK status as that Status). REQUIRES: pending() > 0.
  Result<MessageView> Collect();

  // The sender id of lane L: "<base>/<L>".
  std::string LaneSender(int lane) const;
  const std::string& sender() const { return options_.sender; }
  uint64_t retries() const { return retries_; }
  uint64_t resends() const { return resends_; }

 private:
  struct Request {
    int lane = 0;
    Header header;                                    // header.seq changes with each send
    std::vector<std::shared_ptr<const std::string>> frames;  // frames[1], the header, re-encoded per send
    int64_t server_wait_ms = 0;
    int64_t first_sent_ms = 0;
    int64_t deadline_ms = 0;                          // of the current attempt
    bool sent = false;                                // on the current socket
    bool done = false;
    Result<MessageView> result = Status::Internal("no reply yet");
  };

  // Sends r on the current socket (next seq of its lane) and starts its attempt.
  void Send(Request& r);
  // Waits up to the nearest deadline for replies and connection events, and handles timeouts.
  void Pump();
  void Receive();
  // Ends r with `result` and frees its lane.
  void Finish(Request& r, Result<MessageView> result);
  // After a timeout: gives up on requests past give_up_s, then backs off, reconnects and resends.
  void Retry(int64_t now);
  // Sends every request still waiting again, in submission order; returns how many.
  size_t ResendAll();
  Request* Find(uint64_t rid);
  Request* OldestWaiting();

  ClientOptions options_;
  int window_;
  std::unique_ptr<zmq::socket_t> socket_;
  std::unique_ptr<zmq::socket_t> monitor_;
  bool lost_ = false;
  std::deque<Request> queue_;       // submitted, not collected, in submission order
  std::vector<bool> lane_busy_;
  std::vector<uint64_t> lane_seq_;
  uint64_t next_rid_ = 1;
  int64_t backoff_ms_;
  uint64_t retries_ = 0, resends_ = 0;
};

}  // namespace rl
