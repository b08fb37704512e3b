#include "rl/health/receiver.h"

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/wire/client.h"

namespace rl::health {

Result<std::unique_ptr<HeartbeatReceiver>> HeartbeatReceiver::Bind(const std::string& endpoint) {
  auto r = std::make_unique<HeartbeatReceiver>();
  try {
    r->socket_ = std::make_unique<zmq::socket_t>(ZmqContext(), zmq::socket_type::router);
    r->socket_->set(zmq::sockopt::linger, 0);
    r->socket_->set(zmq::sockopt::router_mandatory, true);  // a probe to a gone role fails loudly
    r->socket_->set(zmq::sockopt::maxmsgsize, int64_t{1} << 20);
    r->socket_->bind(endpoint);
    r->endpoint_ = r->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("cannot bind the heartbeat endpoint " + endpoint + ": " + e.what());
  }
  return r;
}

std::optional<Received> HeartbeatReceiver::Poll(int64_t timeout_ms) {
  int64_t deadline = MonoMillis() + std::max<int64_t>(0, timeout_ms);
  while (true) {
    int64_t left = std::max<int64_t>(0, deadline - MonoMillis());
    std::vector<std::string> frames;
    try {
      zmq::pollitem_t item{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(left));
      if (!(item.revents & ZMQ_POLLIN)) return std::nullopt;
      zmq::message_t part;
      do {
        if (!socket_->recv(part, zmq::recv_flags::dontwait)) break;
        frames.push_back(part.to_string());
      } while (part.more());
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::warn("heartbeat socket: {}", e.what());
      return std::nullopt;
    }
    if (frames.size() >= 2) {
      Received r;
      r.routing = frames.front();
      frames.erase(frames.begin());
      auto hb = DecodeHeartbeat(frames);
      if (hb.ok()) {
        r.hb = std::move(*hb);
        return r;
      }
      spdlog::warn("ignoring a malformed heartbeat: {}", hb.status().message());
    }
    if (MonoMillis() >= deadline) return std::nullopt;
  }
}

bool HeartbeatReceiver::Probe(const std::string& routing, uint64_t rid, int64_t window_ms) {
  std::vector<std::string> frames = EncodeProbe(rid, window_ms);
  try {
    if (!socket_->send(zmq::buffer(routing), zmq::send_flags::sndmore | zmq::send_flags::dontwait)) return false;
    for (size_t i = 0; i < frames.size(); ++i) {
      auto more = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      if (!socket_->send(zmq::buffer(frames[i]), more | zmq::send_flags::dontwait)) return false;
    }
  } catch (const zmq::error_t& e) {
    return false;  // EHOSTUNREACH: the connection is gone
  }
  return true;
}

}  // namespace rl::health
