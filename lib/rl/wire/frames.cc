#include "rl/wire/frames.h"

#include <atomic>
#include <cstring>

#include "rl/core/log.h"
#include "rl/wire/client.h"

namespace rl::wire_detail {

void OpenDealer(const std::string& endpoint, std::unique_ptr<zmq::socket_t>* socket,
                std::unique_ptr<zmq::socket_t>* monitor) {
  static std::atomic<uint64_t> monitors{0};
  CloseDealer(socket, monitor);
  *socket = std::make_unique<zmq::socket_t>(ZmqContext(), zmq::socket_type::dealer);
  (*socket)->set(zmq::sockopt::linger, 0);
  (*socket)->set(zmq::sockopt::reconnect_ivl, 100);
  (*socket)->set(zmq::sockopt::reconnect_ivl_max, 1000);
  std::string address = "inproc://rl-client-monitor-" + std::to_string(monitors++);
  if (zmq_socket_monitor((*socket)->handle(), address.c_str(),
                         ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0) {
    *monitor = std::make_unique<zmq::socket_t>(ZmqContext(), zmq::socket_type::pair);
    (*monitor)->set(zmq::sockopt::linger, 0);
    (*monitor)->connect(address);
  } else {
    spdlog::debug("no socket monitor for {}: {}", endpoint, zmq_strerror(zmq_errno()));
  }
  (*socket)->connect(endpoint);
}

void CloseDealer(std::unique_ptr<zmq::socket_t>* socket, std::unique_ptr<zmq::socket_t>* monitor) {
  if (*socket) zmq_socket_monitor((*socket)->handle(), nullptr, 0);
  monitor->reset();
  socket->reset();
}

// An event is two frames: u16 event id and u32 value (native byte order), then the endpoint.
void ReadMonitorEvent(zmq::socket_t& monitor, bool* lost, bool* back) {
  zmq::message_t event, endpoint;
  if (!monitor.recv(event, zmq::recv_flags::dontwait)) return;
  if (event.more()) (void)monitor.recv(endpoint, zmq::recv_flags::dontwait);
  if (event.size() < sizeof(uint16_t)) return;
  uint16_t id;
  std::memcpy(&id, event.data(), sizeof(id));
  if (id == ZMQ_EVENT_DISCONNECTED) {
    *lost = true;
  } else if (id == ZMQ_EVENT_HANDSHAKE_SUCCEEDED && *lost) {
    *lost = false;
    *back = true;
  }
}

namespace {

constexpr size_t kZeroCopyBytes = 64 * 1024;  // below this a copy costs less than the reference

void ReleaseFrame(void*, void* hint) { delete static_cast<SharedFrame*>(hint); }

}  // namespace

bool SendFrames(zmq::socket_t& socket, const std::vector<SharedFrame>& frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    auto flags = (i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none) |
                 zmq::send_flags::dontwait;
    const std::string& f = *frames[i];
    bool sent;
    if (f.size() >= kZeroCopyBytes) {
      auto* hold = new SharedFrame(frames[i]);  // released by the socket, from its I/O thread
      zmq::message_t msg(const_cast<char*>(f.data()), f.size(), ReleaseFrame, hold);
      sent = socket.send(msg, flags).has_value();
    } else {
      sent = socket.send(zmq::buffer(f), flags).has_value();
    }
    if (!sent) return false;
  }
  return true;
}

std::vector<zmq::message_t> RecvParts(zmq::socket_t& socket) {
  std::vector<zmq::message_t> parts;
  bool more = true;
  while (more) {
    zmq::message_t part;
    if (!socket.recv(part, zmq::recv_flags::none)) break;
    more = part.more();
    parts.push_back(std::move(part));
  }
  return parts;
}

Result<MessageView> ViewReply(std::vector<zmq::message_t> parts) {
  if (parts.size() < 3) return Status::Protocol("a message has " + std::to_string(parts.size()) + " frames, needs 3");
  auto held = std::make_shared<const std::vector<zmq::message_t>>(std::move(parts));
  auto view = [](const zmq::message_t& m) { return std::string_view(m.data<char>(), m.size()); };
  MessageView m;
  RL_ASSIGN_OR_RETURN(m.header, DecodeReplyHeader(view((*held)[0]), view((*held)[1])));
  m.body = view((*held)[2]);
  for (size_t i = 3; i < held->size(); ++i) m.blobs.push_back(view((*held)[i]));
  m.hold = std::move(held);
  return m;
}

Message CopyOf(const MessageView& v) {
  Message m;
  m.header = v.header;
  m.body.assign(v.body);
  m.blobs.assign(v.blobs.begin(), v.blobs.end());
  return m;
}

}  // namespace rl::wire_detail
