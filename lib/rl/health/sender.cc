#include "rl/health/sender.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>

#include <zmq.hpp>

#include "rl/core/clock.h"
#include "rl/core/event_log.h"
#include "rl/core/log.h"
#include "rl/health/progress.h"
#include "rl/health/sd_notify.h"
#include "rl/health/sd_watchdog.h"
#include "rl/wire/client.h"

namespace rl::health {
namespace {

// Stop() must not wait a whole interval for the thread to notice.
constexpr int64_t kMaxPollMs = 100;
// A new socket connects in the background: the first heartbeats may find no peer yet.
constexpr int64_t kFirstRetryMs = 50;

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// False when the heartbeat was dropped.
bool SendFrames(zmq::socket_t* s, const std::vector<std::string>& frames) {
  try {
    for (size_t i = 0; i < frames.size(); ++i) {
      auto more = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
      // dontwait: with ZMQ_IMMEDIATE a heartbeat for an absent watchdog is dropped, not queued
      // (a stale heartbeat delivered late would tell a lie about liveness).
      if (!s->send(zmq::buffer(frames[i]), more | zmq::send_flags::dontwait)) return false;
    }
    return true;
  } catch (const zmq::error_t& e) {
    spdlog::debug("heartbeat not sent: {}", e.what());
    return false;
  }
}

}  // namespace

int64_t ProcessCpuMillis() {
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  auto ms = [](const timeval& t) { return int64_t{t.tv_sec} * 1000 + t.tv_usec / 1000; };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

HeartbeatSender::HeartbeatSender(SenderOptions options)
    : o_(std::move(options)), host_(HostName()), started_ms_(WallMillis()) {
  if (SdNotifyEnabled()) notify_socket_ = std::getenv("NOTIFY_SOCKET");
}

Result<std::unique_ptr<HeartbeatSender>> HeartbeatSender::Start(SenderOptions options) {
  if (options.endpoint.empty() && !SdNotifyEnabled()) return std::unique_ptr<HeartbeatSender>();
  if (options.interval_ms < 10 || options.interval_ms > 3600000) {
    return Status::InvalidArgument("heartbeat interval must be between 0.01 and 3600 s");
  }
  if (!options.endpoint.empty() && options.endpoint.find("://") == std::string::npos) {
    return Status::InvalidArgument("heartbeat endpoint '" + options.endpoint + "' is not like tcp://HOST:PORT");
  }
  std::unique_ptr<HeartbeatSender> s(new HeartbeatSender(std::move(options)));
  s->thread_ = std::thread([p = s.get()] { p->Loop(); });
  return s;
}

HeartbeatSender::~HeartbeatSender() { Stop(); }

void HeartbeatSender::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

Heartbeat HeartbeatSender::Current() const {
  Heartbeat hb;
  hb.role = o_.role;
  hb.id = o_.id;
  hb.pid = static_cast<uint64_t>(::getpid());
  hb.host = host_;
  if (!EventLog::Current(&hb.phase, &hb.step)) hb.phase = "start";
  hb.version = Progress().version.load();
  hb.interval_ms = static_cast<uint64_t>(o_.interval_ms);
  hb.started_ms = started_ms_;
  hb.counters = Progress().Snapshot();
  hb.endpoints = o_.endpoints;
  return hb;
}

void HeartbeatSender::Loop() {
  std::unique_ptr<zmq::socket_t> socket;
  if (!o_.endpoint.empty()) {
    try {
      socket = std::make_unique<zmq::socket_t>(ZmqContext(), zmq::socket_type::dealer);
      socket->set(zmq::sockopt::linger, 200);  // room for the leaving heartbeat
      socket->set(zmq::sockopt::immediate, 1);
      socket->set(zmq::sockopt::sndhwm, 4);
      socket->set(zmq::sockopt::reconnect_ivl, 100);
      socket->set(zmq::sockopt::reconnect_ivl_max, 1000);
      socket->connect(o_.endpoint);
    } catch (const zmq::error_t& e) {
      spdlog::error("heartbeat socket for {}: {}; no heartbeats", o_.endpoint, e.what());
      socket.reset();
    }
  }
  bool systemd = !notify_socket_.empty();
  auto notify = [&](const std::string& state) { SdNotifyTo(notify_socket_, state); };
  if (systemd) notify("READY=1\nSTATUS=" + o_.role + " " + o_.id + " started");
  bool delivered = false;  // until the first heartbeat gets out, retry soon, not an interval later
  SdWatchdogGate gate(o_.sd_watchdog);
  auto beat = [&](Heartbeat hb) {
    hb.seq = ++seq_;
    hb.sent_ms = WallMillis();
    if (socket && SendFrames(socket.get(), EncodeHeartbeat(hb))) delivered = true;
    if (!systemd) return;
    std::string status = "STATUS=phase " + hb.phase + " step " + std::to_string(hb.step);
    if (gate.Ping(hb, MonoMillis(), ProcessCpuMillis())) {
      notify("WATCHDOG=1\n" + status);
    } else {
      notify(status + ": " + gate.why() + "; no WATCHDOG=1");
    }
  };
  struct Pending {
    Probe probe;
    int64_t until_ms, cpu_ms, from_ms;
  };
  std::optional<Pending> probe;
  int64_t next = MonoMillis();
  while (!stop_.load()) {
    int64_t now = MonoMillis();
    if (now >= next) {
      beat(Current());
      next = std::max(next + o_.interval_ms, now + 1);
      if (!delivered && socket) next = std::min(next, now + kFirstRetryMs);
    }
    if (probe && now >= probe->until_ms) {
      Heartbeat hb = Current();
      hb.probe_rid = probe->probe.rid;
      hb.cpu_busy = double(ProcessCpuMillis() - probe->cpu_ms) / double(std::max<int64_t>(1, now - probe->from_ms));
      beat(hb);
      probe.reset();
    }
    int64_t wait = std::min(next, probe ? probe->until_ms : next) - now;
    wait = std::clamp<int64_t>(wait, 0, kMaxPollMs);
    if (!socket) {
      std::this_thread::sleep_for(std::chrono::milliseconds(wait));
      continue;
    }
    try {
      zmq::pollitem_t item{static_cast<void*>(*socket), 0, ZMQ_POLLIN, 0};
      zmq::poll(&item, 1, std::chrono::milliseconds(wait));
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<std::string> frames;
      zmq::message_t part;
      do {
        if (!socket->recv(part, zmq::recv_flags::dontwait)) break;
        frames.push_back(part.to_string());
      } while (part.more());
      auto p = DecodeProbe(frames);
      if (!p.ok()) {
        spdlog::debug("ignoring a message on the heartbeat socket: {}", p.status().message());
        continue;
      }
      int64_t t = MonoMillis();
      probe = Pending{*p, t + p->window_ms, ProcessCpuMillis(), t};
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR) spdlog::debug("heartbeat socket: {}", e.what());
    }
  }
  Heartbeat last = Current();
  last.leaving = true;
  beat(last);
  if (systemd) notify("STOPPING=1");
}

}  // namespace rl::health
