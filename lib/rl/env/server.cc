#include "rl/env/server.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/env/protocol.h"
#include "rl/health/progress.h"
#include "rl/wire/client.h"

namespace rl::env {
namespace {

constexpr int kMaxPollMs = 200;  // how often the stop flag is looked at
constexpr size_t kMaxRequestsPerTurn = 256;
constexpr size_t kMaxSenderBytes = 256;  // as rl-queue (rl-protocol(7) LIMITS)
constexpr size_t kMaxKeptSenders = 10000;

std::string View(const zmq::message_t& m) { return std::string(m.data<char>(), m.size()); }

}  // namespace

Result<std::unique_ptr<Server>> Server::Open(ServerOptions options) {
  std::unique_ptr<Server> s(new Server(std::move(options)));
  s->wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (s->wake_fd_ < 0) return Status::IOError(std::string("eventfd: ") + std::strerror(errno));
  try {
    s->socket_ = std::make_unique<zmq::socket_t>(ZmqContext(), zmq::socket_type::router);
    s->socket_->set(zmq::sockopt::linger, 0);
    s->socket_->set(zmq::sockopt::router_mandatory, false);  // a reply to a gone peer is dropped; it retries
    s->socket_->set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(s->o_.max_message) * 2 + (1 << 20));
    s->socket_->bind(s->o_.bind);
    s->endpoint_ = s->socket_->get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return Status::Unavailable("bind " + s->o_.bind + ": " + e.what());
  }
  s->pool_ = std::make_unique<WorkerPool>(s->o_.pool);
  return s;
}

Server::~Server() {
  pool_.reset();  // workers first: they touch finished_ and wake_fd_
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void Server::Send(const std::string& routing, const Header& h, const Status& s, const std::string& body) {
  Message m;
  m.header.op = h.op;
  m.header.rid = h.rid;
  m.header.seq = h.seq;
  m.header.status = static_cast<uint8_t>(s.code());
  m.header.msg = s.ok() ? "" : s.message();
  m.body = s.ok() ? body : EmptyBody();
  std::vector<std::string> frames = EncodeReply(m);
  try {
    socket_->send(zmq::buffer(routing), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
    for (size_t i = 0; i < frames.size(); ++i) {
      auto more = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      socket_->send(zmq::buffer(frames[i]), more | zmq::send_flags::dontwait);
    }
  } catch (const zmq::error_t& e) {
    spdlog::warn("reply to rid {}: {}", h.rid, e.what());
  }
}

void Server::HandleFrames(std::vector<zmq::message_t>& parts) {
  if (parts.empty()) return;
  std::string routing = View(parts[0]);
  if (parts.size() < 4) {
    Send(routing, Header(), Status::Protocol("a message has " + std::to_string(parts.size() - 1) + " frames, needs 3"),
         "");
    return;
  }
  auto header = DecodeRequestHeader(View(parts[1]), View(parts[2]));
  if (!header.ok()) {
    Send(routing, Header(), header.status(), "");  // rid unknown: 0
    return;
  }
  const Header& h = *header;
  if (h.rid == 0) {
    return Send(routing, h, Status::InvalidArgument("rid 0 is reserved for replies to undecodable requests"), "");
  }
  if (h.from.size() > kMaxSenderBytes) {
    return Send(routing, h, Status::InvalidArgument("sender id 'from' is over 256 bytes"), "");
  }
  size_t total = 0;
  for (size_t i = 1; i < parts.size(); ++i) total += parts[i].size();
  if (total > o_.max_message) {
    return Send(routing, h, Status::TooLarge("message of " + std::to_string(total) + " bytes is above " +
                                             std::to_string(o_.max_message)), "");
  }
  if (h.op == static_cast<uint8_t>(Op::kPing)) {
    PingReply p;
    p.time_ms = WallMillis();
    p.tools = pool_->ToolNames();
    p.workers = static_cast<uint64_t>(pool_->workers());
    return Send(routing, h, Status::OK(), EncodePingReply(p));
  }
  if (h.op != static_cast<uint8_t>(kOpToolCall)) {
    return Send(routing, h, Status::Protocol("unknown op " + OpName(h.op) + " (rl-env serves ping and call)"), "");
  }
  HandleCall(routing, h, std::string_view(parts[3].data<char>(), parts[3].size()));
}

void Server::HandleCall(const std::string& routing, const Header& h, std::string_view body) {
  Key key{h.from, h.rid};
  if (!h.from.empty()) {
    auto kept = kept_.find(h.from);
    if (kept != kept_.end() && kept->second.rid == h.rid) return Send(routing, h, Status::OK(), kept->second.body);
    auto running = running_.find(key);
    if (running != running_.end()) {
      running->second->routing = routing;  // the client reconnected while its calls run
      running->second->header.seq = h.seq;
      return;
    }
  } else {
    key.second = ++anonymous_;
  }
  auto calls = DecodeCallRequest(body);
  if (!calls.ok()) return Send(routing, h, calls.status(), "");
  auto p = std::make_shared<Pending>();
  p->routing = routing;
  p->header = h;
  p->calls = std::move(*calls);
  p->results.resize(p->calls.size());
  p->remaining = p->calls.size();
  p->start_ms = MonoMillis();
  running_[key] = p;
  if (p->calls.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    finished_.push_back(p);
    return;
  }
  for (size_t i = 0; i < p->calls.size(); ++i) {
    pool_->Submit(p->calls[i], [this, p, i](ToolResult r) { OnResult(p, i, std::move(r)); });
  }
}

// On a worker thread (or the socket thread, for an unknown tool).
void Server::OnResult(const std::shared_ptr<Pending>& p, size_t i, ToolResult r) {
  bool fault = !r.ok && r.kind != kKindToolError && r.kind != kKindUnknownTool && r.kind != kKindBadArguments;
  if (fault) {
    spdlog::warn("{}", r.error);
    if (o_.events) o_.events->Emit("tool-failure", {{"tool", p->calls[i].name}, {"kind", r.kind}, {"error", r.error}});
  } else if (!r.ok) {
    spdlog::debug("call of '{}': {}: {}", p->calls[i].name, r.kind, r.error);
  }
  bool last;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++calls_;
    if (!r.ok) ++failures_[r.kind];
    p->results[i] = std::move(r);
    last = --p->remaining == 0;
    if (last) finished_.push_back(p);
  }
  if (last) {
    uint64_t one = 1;
    ssize_t n = ::write(wake_fd_, &one, sizeof(one));
    (void)n;
  }
}

void Server::SendReplies() {
  uint64_t count;
  ssize_t n = ::read(wake_fd_, &count, sizeof(count));
  (void)n;
  std::vector<std::shared_ptr<Pending>> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done.swap(finished_);
    requests_ += done.size();
  }
  int64_t now = MonoMillis();
  for (const auto& p : done) {
    CallReply reply;
    reply.results = std::move(p->results);
    reply.seconds = (now - p->start_ms) / 1000.0;
    std::string body = EncodeCallReply(reply);
    Send(p->routing, p->header, Status::OK(), body);
    health::Progress().requests++;
    if (p->header.from.empty()) {
      for (auto it = running_.begin(); it != running_.end(); ++it) {
        if (it->second == p) {
          running_.erase(it);
          break;
        }
      }
      continue;
    }
    running_.erase({p->header.from, p->header.rid});
    // A sender's newest request is the one it may retry: an older one finishing later keeps out.
    auto kept = kept_.find(p->header.from);
    if (kept == kept_.end() || kept->second.rid < p->header.rid) {
      kept_[p->header.from] = Kept{p->header.rid, std::move(body), now};
    }
  }
}

void Server::Housekeeping(int64_t now_ms) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    it = now_ms - it->second.at_ms > o_.keep_replies_ms ? kept_.erase(it) : std::next(it);
  }
  // Every `rl-env call` is a sender of its own: past the cap the oldest replies go first.
  if (kept_.size() > kMaxKeptSenders) {
    std::vector<int64_t> ages;
    for (const auto& [sender, kept] : kept_) ages.push_back(kept.at_ms);
    auto cut = ages.begin() + static_cast<std::ptrdiff_t>(ages.size() - kMaxKeptSenders);
    std::nth_element(ages.begin(), cut, ages.end());
    for (auto it = kept_.begin(); it != kept_.end();) it = it->second.at_ms < *cut ? kept_.erase(it) : std::next(it);
  }
  if (o_.progress_ms <= 0) return;
  uint64_t calls;
  std::map<std::string, uint64_t> failures;
  {
    std::lock_guard<std::mutex> lock(mu_);
    calls = calls_;
    failures.swap(failures_);
    calls_ = 0;
  }
  if (calls == 0) return;
  uint64_t failed = 0;
  std::string kinds;
  for (const auto& [kind, count] : failures) {
    failed += count;
    kinds += (kinds.empty() ? "" : ", ") + kind + " " + std::to_string(count);
  }
  spdlog::info("{} calls in the last {:g} s, {} failed{}; {} requests running, {} calls queued", calls,
               o_.progress_ms / 1000.0, failed, kinds.empty() ? "" : " (" + kinds + ")", running_.size(),
               pool_->queued());
}

Status Server::Run(const std::atomic<bool>& stop) {
  std::string tools;
  for (const auto& [name, command] : o_.pool.tools) tools += (tools.empty() ? "" : ", ") + name;
  spdlog::info("serving tool calls on {}: {} ({} workers, {} ms per call)", endpoint_, tools, pool_->workers(),
               o_.pool.limits.timeout_ms);
  if (o_.events) {
    o_.events->EnterPhase("serve");
    o_.events->Emit("serve", {{"endpoint", endpoint_}, {"tools", pool_->ToolNames()}, {"workers", pool_->workers()}});
  }
  next_housekeeping_ms_ = MonoMillis() + (o_.progress_ms > 0 ? o_.progress_ms : 10000);
  while (!stop.load()) {
    zmq::pollitem_t items[2] = {{static_cast<void*>(*socket_), 0, ZMQ_POLLIN, 0}, {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(kMaxPollMs));
      for (size_t n = 0; n < kMaxRequestsPerTurn; ++n) {
        std::vector<zmq::message_t> parts;
        bool more = true;
        while (more) {
          zmq::message_t part;
          if (!socket_->recv(part, zmq::recv_flags::dontwait)) break;
          more = part.more();
          parts.push_back(std::move(part));
        }
        if (parts.empty()) break;
        HandleFrames(parts);
      }
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::warn("socket: {}", e.what());
    }
    SendReplies();
    int64_t now = MonoMillis();
    if (now >= next_housekeeping_ms_) {
      Housekeeping(now);
      next_housekeeping_ms_ = now + (o_.progress_ms > 0 ? o_.progress_ms : 10000);
    }
  }
  spdlog::info("stopping: {} requests answered, {} still running (their clients retry)", requests_, running_.size());
  if (o_.events) o_.events->Emit("stop", {{"requests", requests_}, {"running", running_.size()}});
  return Status::OK();
}

}  // namespace rl::env
