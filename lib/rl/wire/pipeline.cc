#include "rl/wire/pipeline.h"

#include <algorithm>
#include <random>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/wire/frames.h"

namespace rl {

using wire_detail::SharedFrame;

Pipeline::Pipeline(ClientOptions options, int window)
    : options_(std::move(options)), window_(std::clamp(window, 1, 1024)), lane_busy_(window_, false),
      lane_seq_(window_, 0), backoff_ms_(options_.backoff_min_ms) {
  if (options_.sender.empty()) options_.sender = NewSenderId("client");
  std::random_device rd;  // as Client: a reused sender id does not meet its predecessor's rids
  next_rid_ = ((uint64_t{rd()} << 32) ^ rd()) & 0x7fffffffffffULL;
  if (next_rid_ == 0) next_rid_ = 1;
  wire_detail::OpenDealer(options_.endpoint, &socket_, &monitor_);
}

Pipeline::~Pipeline() { wire_detail::CloseDealer(&socket_, &monitor_); }

std::string Pipeline::LaneSender(int lane) const { return options_.sender + "/" + std::to_string(lane); }

void Pipeline::Submit(Op op, std::string body, std::vector<std::string> blobs, int64_t server_wait_ms) {
  Submit(op, std::make_shared<const std::string>(std::move(body)), std::move(blobs), server_wait_ms);
}

void Pipeline::Submit(Op op, std::shared_ptr<const std::string> body, std::vector<std::string> blobs,
                      int64_t server_wait_ms) {
  int lane = static_cast<int>(std::find(lane_busy_.begin(), lane_busy_.end(), false) - lane_busy_.begin());
  lane_busy_[lane] = true;  // a free one exists: fewer than window_ requests are pending
  Request& r = queue_.emplace_back();
  r.lane = lane;
  r.header.op = static_cast<uint8_t>(op);
  r.header.rid = next_rid_++;
  r.header.from = LaneSender(lane);
  r.server_wait_ms = server_wait_ms;
  r.frames.push_back(std::make_shared<const std::string>(kProtocolId));
  r.frames.push_back(nullptr);
  r.frames.push_back(body->empty() ? std::make_shared<const std::string>(EmptyBody()) : std::move(body));
  for (std::string& b : blobs) r.frames.push_back(std::make_shared<const std::string>(std::move(b)));
  Send(r);
}

void Pipeline::Send(Request& r) {
  int64_t now = MonoMillis();
  if (r.first_sent_ms == 0) r.first_sent_ms = now;
  r.header.seq = ++lane_seq_[r.lane];
  r.frames[1] = std::make_shared<const std::string>(EncodeRequestHeader(r.header));
  int64_t attempt_ms = options_.attempt_timeout_ms + r.server_wait_ms;
  if (options_.give_up_s > 0) {
    int64_t left = static_cast<int64_t>(options_.give_up_s * 1000) - (now - r.first_sent_ms);
    attempt_ms = std::max<int64_t>(std::min(attempt_ms, left + r.server_wait_ms), 50);
  }
  r.deadline_ms = now + attempt_ms;
  try {
    r.sent = wire_detail::SendFrames(*socket_, r.frames);
  } catch (const zmq::error_t& e) {
    spdlog::debug("{} to {}: zmq: {}", OpName(r.header.op), options_.endpoint, e.what());
    r.sent = false;
  }
  if (!r.sent) r.deadline_ms = now;  // retried at once, after a backoff
}

Result<MessageView> Pipeline::Collect() {
  while (!queue_.front().done) Pump();
  Result<MessageView> result = std::move(queue_.front().result);
  queue_.pop_front();
  return result;
}

void Pipeline::Finish(Request& r, Result<MessageView> result) {
  r.done = true;
  r.result = std::move(result);
  r.frames.clear();  // a put's rows need not wait for the collection
  lane_busy_[r.lane] = false;
}

Pipeline::Request* Pipeline::Find(uint64_t rid) {
  for (Request& r : queue_) {
    if (r.header.rid == rid) return r.done ? nullptr : &r;
  }
  return nullptr;
}

Pipeline::Request* Pipeline::OldestWaiting() {
  for (Request& r : queue_) {
    if (!r.done) return &r;
  }
  return nullptr;
}

void Pipeline::Pump() {
  int64_t now = MonoMillis();
  int64_t nearest = INT64_MAX;
  bool stoppable = false;
  bool stopped = options_.stop != nullptr && options_.stop->load();
  for (Request& r : queue_) {
    if (r.done) continue;
    bool waits = r.server_wait_ms > 0 && options_.stop != nullptr;
    if (waits && stopped) {
      Finish(r, Status::Timeout("stopped while waiting for the reply"));
      continue;
    }
    stoppable = stoppable || waits;
    nearest = std::min(nearest, r.deadline_ms);
  }
  if (nearest == INT64_MAX) return;
  int64_t wait_ms = std::max<int64_t>(nearest - now, 0);
  if (stoppable) wait_ms = std::min<int64_t>(wait_ms, 100);
  try {
    zmq::pollitem_t items[2] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0},
                                {monitor_ ? static_cast<void*>(*monitor_) : nullptr, 0, ZMQ_POLLIN, 0}};
    zmq::poll(items, monitor_ ? 2 : 1, std::chrono::milliseconds(wait_ms));
    if (items[0].revents & ZMQ_POLLIN) Receive();
    bool back = false;
    if (monitor_ && (items[1].revents & ZMQ_POLLIN)) wire_detail::ReadMonitorEvent(*monitor_, &lost_, &back);
    if (back) {  // the requests went out on a connection that broke; their replies, if any, with it
      Receive();
      resends_ += ResendAll();
      return;
    }
  } catch (const zmq::error_t& e) {
    spdlog::debug("pipeline to {}: zmq: {}", options_.endpoint, e.what());
    for (Request& r : queue_) r.deadline_ms = std::min(r.deadline_ms, now);
  }
  now = MonoMillis();
  for (Request& r : queue_) {
    if (!r.done && r.deadline_ms <= now) return Retry(now);
  }
}

// Every reply waiting on the socket.
void Pipeline::Receive() {
  while (socket_->get(zmq::sockopt::events) & ZMQ_POLLIN) {
    auto reply = wire_detail::ViewReply(wire_detail::RecvParts(*socket_));
    Request* r = nullptr;
    if (!reply.ok()) {
      r = OldestWaiting();  // which request it answers cannot be told: the oldest gets the error
    } else if (reply->header.rid == 0 && reply->header.status != 0) {
      r = OldestWaiting();  // the server could not read a header of ours; no retry changes that
    } else {
      r = Find(reply->header.rid);  // null: a late reply to an earlier attempt
    }
    if (r == nullptr) continue;
    backoff_ms_ = options_.backoff_min_ms;
    if (reply.ok() && reply->header.status != 0) {
      Finish(*r, Status::FromWire(reply->header.status, reply->header.msg));
    } else {
      Finish(*r, std::move(reply));
    }
  }
}

size_t Pipeline::ResendAll() {
  size_t n = 0;
  for (Request& r : queue_) {
    if (r.done) continue;
    ++n;
    Send(r);
  }
  retries_ += n;
  return n;
}

void Pipeline::Retry(int64_t now) {
  int64_t sleep_ms = backoff_ms_;
  for (Request& r : queue_) {
    if (r.done || options_.give_up_s <= 0) continue;
    int64_t left = static_cast<int64_t>(options_.give_up_s * 1000) - (now - r.first_sent_ms);
    if (left <= 0) {
      Finish(r, Status::Unavailable("no reply from " + options_.endpoint + " to " + OpName(r.header.op) + " after " +
                                    std::to_string((now - r.first_sent_ms) / 1000) + " s"));
    } else {
      sleep_ms = std::min(sleep_ms, left);
    }
  }
  Request* oldest = OldestWaiting();
  if (oldest == nullptr) return;
  spdlog::debug("pipeline to {}: {} (rid {}) timed out; retrying what waits in {} ms", options_.endpoint,
                OpName(oldest->header.op), oldest->header.rid, sleep_ms);
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  backoff_ms_ = std::min<int64_t>(backoff_ms_ * 2, options_.backoff_max_ms);
  wire_detail::OpenDealer(options_.endpoint, &socket_, &monitor_);
  lost_ = false;
  ResendAll();
}

}  // namespace rl
