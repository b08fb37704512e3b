#include "rl/wire/client.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/wire/frames.h"

namespace rl {

zmq::context_t& ZmqContext() {
  static zmq::context_t ctx(1);
  return ctx;
}

std::string NewSenderId(const std::string& prefix) {
  char host[64] = {0};
  ::gethostname(host, sizeof(host) - 1);
  std::random_device rd;
  uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  char buf[160];
  std::snprintf(buf, sizeof(buf), "%s@%s:%d:%016llx", prefix.c_str(), host, static_cast<int>(::getpid()),
                static_cast<unsigned long long>(r));
  return buf;
}

Client::Client(ClientOptions options) : options_(std::move(options)) {
  if (options_.sender.empty()) options_.sender = NewSenderId("client");
  // Start rids from a random point so a restarted process with a reused sender id cannot
  // collide with its predecessor's cached replies.
  std::random_device rd;
  next_rid_ = ((uint64_t{rd()} << 32) ^ rd()) & 0x7fffffffffffULL;
  if (next_rid_ == 0) next_rid_ = 1;
  Reconnect();
}

Client::~Client() { wire_detail::CloseDealer(&socket_, &monitor_); }

void Client::Reconnect() {
  try {
    wire_detail::OpenDealer(options_.endpoint, &socket_, &monitor_);
  } catch (const zmq::error_t& e) {
    // Text ZeroMQ cannot connect to (the tools check their endpoint options first): every call
    // fails with this instead of the process aborting in a constructor.
    wire_detail::CloseDealer(&socket_, &monitor_);
    unusable_ = Status::InvalidArgument("cannot connect to '" + options_.endpoint + "': " + e.what());
  }
  lost_ = false;
}

void Client::ReadMonitorEvent(bool* back) {
  bool was_lost = lost_;
  wire_detail::ReadMonitorEvent(*monitor_, &lost_, back);
  if (lost_ && !was_lost) spdlog::debug("connection to {} lost", options_.endpoint);
}

namespace {

using wire_detail::CopyOf;
using wire_detail::SharedFrame;
using wire_detail::ViewReply;

}  // namespace

Result<MessageView> Client::Attempt(const std::vector<SharedFrame>& frames, uint64_t rid, int64_t timeout_ms,
                                    bool* resend, bool stoppable) {
  *resend = false;
  try {
    lost_ = false;  // what broke before this send does not concern it
    if (!wire_detail::SendFrames(*socket_, frames)) return Status::Timeout("send queue full");
    int64_t deadline = MonoMillis() + timeout_ms;
    while (true) {
      int64_t left = deadline - MonoMillis();
      if (left <= 0) return Status::Timeout("no reply within " + std::to_string(timeout_ms) + " ms");
      zmq::pollitem_t items[2] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0},
                                  {monitor_ ? static_cast<void*>(*monitor_) : nullptr, 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, monitor_ ? 2 : 1, std::chrono::milliseconds(stoppable ? std::min<int64_t>(left, 100) : left));
      if (monitor_ && (items[1].revents & ZMQ_POLLIN)) {
        bool back = false;
        ReadMonitorEvent(&back);
        // The request went out on a connection that broke; a new one is up: its reply, if the
        // server got it at all, went to the old one.
        if (back && !(items[0].revents & ZMQ_POLLIN)) {
          *resend = true;
          return Status::Unavailable("the connection to " + options_.endpoint + " broke and is back");
        }
      }
      if (!(items[0].revents & ZMQ_POLLIN)) {
        if (stoppable && options_.stop->load()) return Status::Timeout("stopped while waiting for the reply");
        continue;
      }
      auto decoded = ViewReply(wire_detail::RecvParts(*socket_));
      if (!decoded.ok()) return decoded.status();
      // A late reply to an earlier attempt is skipped; rid 0 with an error is the server saying
      // it could not read our header, which no retry will change.
      if (decoded->header.rid != rid && !(decoded->header.rid == 0 && decoded->header.status != 0)) continue;
      return decoded;
    }
  } catch (const zmq::error_t& e) {
    return Status::Unavailable(std::string("zmq: ") + e.what());
  }
}

Result<Message> Client::Call(Op op, std::string body, std::vector<std::string> blobs, int64_t server_wait_ms) {
  return CallWithRid(next_rid_++, op, std::move(body), std::move(blobs), server_wait_ms);
}

Result<Message> Client::CallWithRid(uint64_t rid, Op op, std::string body, std::vector<std::string> blobs,
                                    int64_t server_wait_ms) {
  auto shared = std::make_shared<const std::string>(std::move(body));
  RL_ASSIGN_OR_RETURN(MessageView reply, Exchange(rid, op, std::move(shared), std::move(blobs), server_wait_ms));
  return CopyOf(reply);
}

Result<Message> Client::CallShared(Op op, std::shared_ptr<const std::string> body, int64_t server_wait_ms) {
  RL_ASSIGN_OR_RETURN(MessageView reply, Exchange(next_rid_++, op, std::move(body), {}, server_wait_ms));
  return CopyOf(reply);
}

Result<MessageView> Client::CallView(Op op, std::string body, std::vector<std::string> blobs, int64_t server_wait_ms) {
  auto shared = std::make_shared<const std::string>(std::move(body));
  return Exchange(next_rid_++, op, std::move(shared), std::move(blobs), server_wait_ms);
}

Result<MessageView> Client::Exchange(uint64_t rid, Op op, std::shared_ptr<const std::string> body,
                                     std::vector<std::string> blobs, int64_t server_wait_ms) {
  if (!unusable_.ok()) return unusable_;
  Header header;
  header.op = static_cast<uint8_t>(op);
  header.rid = rid;
  header.from = options_.sender;
  std::vector<SharedFrame> frames;  // encoded once, for every attempt; frames[1] is the header
  frames.push_back(std::make_shared<const std::string>(kProtocolId));
  frames.push_back(nullptr);
  frames.push_back(body->empty() ? std::make_shared<const std::string>(EmptyBody()) : std::move(body));
  for (std::string& b : blobs) frames.push_back(std::make_shared<const std::string>(std::move(b)));
  int64_t start = MonoMillis();
  int64_t backoff = options_.backoff_min_ms;
  while (true) {
    header.seq = next_seq_++;
    frames[1] = std::make_shared<const std::string>(EncodeRequestHeader(header));
    int64_t attempt_ms = options_.attempt_timeout_ms + server_wait_ms;
    if (options_.give_up_s > 0) {
      int64_t left = static_cast<int64_t>(options_.give_up_s * 1000) - (MonoMillis() - start);
      attempt_ms = std::max<int64_t>(std::min(attempt_ms, left + server_wait_ms), 50);
    }
    bool resend = false;
    bool stoppable = server_wait_ms > 0 && options_.stop != nullptr;
    auto reply = Attempt(frames, header.rid, attempt_ms, &resend, stoppable);
    if (reply.ok()) {
      if (reply->header.status != 0) return Status::FromWire(reply->header.status, reply->header.msg);
      return reply;
    }
    if (reply.status().code() == Code::kProtocol) return reply.status();
    if (stoppable && options_.stop->load()) return reply.status();
    double elapsed_s = (MonoMillis() - start) / 1000.0;
    if (options_.give_up_s > 0 && elapsed_s >= options_.give_up_s) {
      return Status::Unavailable("no reply from " + options_.endpoint + " to " + OpName(header.op) + " after " +
                                 std::to_string(static_cast<int>(elapsed_s)) + " s");
    }
    ++retries_;
    if (resend) {  // same socket, same rid, no backoff: the server is back
      ++resends_;
      spdlog::debug("{} to {}: {}; sending again", OpName(header.op), options_.endpoint, reply.status().ToString());
      backoff = options_.backoff_min_ms;
      continue;
    }
    spdlog::debug("{} to {}: {}; retrying in {} ms", OpName(header.op), options_.endpoint,
                  reply.status().ToString(), backoff);
    int64_t sleep_ms = backoff;
    if (options_.give_up_s > 0) {
      sleep_ms = std::min<int64_t>(sleep_ms, static_cast<int64_t>(options_.give_up_s * 1000) - (MonoMillis() - start));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(sleep_ms, 0)));
    backoff = std::min<int64_t>(backoff * 2, options_.backoff_max_ms);
    Reconnect();
    if (!unusable_.ok()) return unusable_;
  }
}

}  // namespace rl
