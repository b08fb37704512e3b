// The heartbeat protocol over real sockets on 127.0.0.1: a sender thread and a receiver.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "rl/core/clock.h"
#include "rl/core/event_log.h"
#include "rl/health/progress.h"
#include "rl/health/receiver.h"
#include "rl/health/sender.h"

namespace rl::health {
namespace {

std::optional<Received> Next(HeartbeatReceiver* r, int64_t within_ms, uint64_t probe_rid = 0) {
  int64_t until = MonoMillis() + within_ms;
  while (MonoMillis() < until) {
    auto got = r->Poll(until - MonoMillis());
    if (got && (probe_rid == 0 || got->hb.probe_rid == probe_rid)) return got;
  }
  return std::nullopt;
}

TEST(HeartbeatCodecTest, EncodeThenDecodeKeepsEveryField) {
  Heartbeat hb;
  hb.role = "rollout";
  hb.id = "3";
  hb.pid = 42;
  hb.host = "h";
  hb.phase = "generate";
  hb.step = 7;
  hb.version = 6;
  hb.interval_ms = 250;
  hb.started_ms = 1700000000000;
  hb.seq = 9;
  hb.probe_rid = 5;
  hb.cpu_busy = 0.5;
  hb.counters = {{"tokens", 1000}, {"rows", 10}};
  hb.endpoints = {{"queue", "tcp://127.0.0.1:1"}};
  auto back = DecodeHeartbeat(EncodeHeartbeat(hb));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->Key(), "rollout/3");
  EXPECT_EQ(back->pid, 42u);
  EXPECT_EQ(back->phase, "generate");
  EXPECT_EQ(back->step, 7);
  EXPECT_EQ(back->version, 6);
  EXPECT_EQ(back->interval_ms, 250u);
  EXPECT_EQ(back->started_ms, 1700000000000);
  EXPECT_EQ(back->seq, 9u);
  EXPECT_EQ(back->probe_rid, 5u);
  EXPECT_DOUBLE_EQ(back->cpu_busy, 0.5);
  EXPECT_EQ(back->counters, hb.counters);
  EXPECT_EQ(back->endpoints, hb.endpoints);
}

TEST(HeartbeatCodecTest, AProbeIsNotAHeartbeat) {
  auto hb = DecodeHeartbeat(EncodeProbe(1, 100));
  EXPECT_EQ(hb.status().code(), Code::kProtocol);
  auto p = DecodeProbe(EncodeProbe(0, 100));
  EXPECT_EQ(p.status().code(), Code::kProtocol);
}

TEST(HeartbeatSenderTest, SendsPhaseStepAndCountersEveryIntervalAndLeavesOnStop) {
  auto receiver = HeartbeatReceiver::Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  EventLog events;  // the process's role log: phase and step come from here
  events.SetPhase("train");
  events.SetStep(12);
  Progress().micro_batches += 3;
  Progress().version = 11;
  auto sender = HeartbeatSender::Start({(*receiver)->endpoint(), "train", "0", 50, {{"queue", "tcp://q"}}, {}});
  ASSERT_TRUE(sender.ok());
  auto first = Next(receiver->get(), 3000);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->hb.Key(), "train/0");
  EXPECT_EQ(first->hb.phase, "train");
  EXPECT_EQ(first->hb.step, 12);
  EXPECT_EQ(first->hb.version, 11);
  EXPECT_EQ(first->hb.counters.at("micro_batches"), Progress().micro_batches.load());
  EXPECT_EQ(first->hb.endpoints.at("queue"), "tcp://q");
  EXPECT_EQ(first->hb.pid, static_cast<uint64_t>(::getpid()));
  auto second = Next(receiver->get(), 1000);
  ASSERT_TRUE(second.has_value());
  EXPECT_GT(second->hb.seq, first->hb.seq);
  (*sender)->Stop();
  bool left = false;
  for (int i = 0; i < 10 && !left; ++i) {
    auto hb = Next(receiver->get(), 1000);
    left = hb && hb->hb.leaving;
  }
  EXPECT_TRUE(left);
}

double ProcessCpuSeconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

TEST(HeartbeatSenderTest, AnswersAProbeWithTheCpuItUsedInTheWindow) {
  auto receiver = HeartbeatReceiver::Bind("tcp://127.0.0.1:0");
  ASSERT_TRUE(receiver.ok());
  auto sender = HeartbeatSender::Start({(*receiver)->endpoint(), "rollout", "1", 1000, {}, {}});
  ASSERT_TRUE(sender.ok());
  auto first = Next(receiver->get(), 3000);
  ASSERT_TRUE(first.has_value());
  // The 300 ms window lies inside [before, after]: the CPU the process really used then bounds
  // the answer from above. On a loaded machine (ctest -j) the busy thread gets only a share of a
  // core, so the lower bound is "clearly busy", not a fixed fraction of a core.
  double cpu_before = ProcessCpuSeconds();
  ASSERT_TRUE((*receiver)->Probe(first->routing, 77, 300));
  std::atomic<bool> done{false};
  std::thread busy([&] {  // burn CPU during the window
    volatile uint64_t x = 0;
    while (!done) x = x + 1;
  });
  auto answer = Next(receiver->get(), 3000, 77);
  done = true;
  busy.join();
  double cpu_used = ProcessCpuSeconds() - cpu_before;
  ASSERT_TRUE(answer.has_value());
  EXPECT_GT(answer->hb.cpu_busy, 0.05);
  EXPECT_LE(answer->hb.cpu_busy * 0.3, cpu_used + 0.02);
}

TEST(HeartbeatSenderTest, AReceiverBoundLaterStillHearsTheRole) {
  // The watchdog restarts: roles keep their sockets, which reconnect to the new one.
  int port;
  {
    auto probe = HeartbeatReceiver::Bind("tcp://127.0.0.1:0");
    ASSERT_TRUE(probe.ok());
    std::string ep = (*probe)->endpoint();
    port = std::stoi(ep.substr(ep.rfind(':') + 1));
  }
  std::string endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  auto sender = HeartbeatSender::Start({endpoint, "reward", "0", 50, {}, {}});
  ASSERT_TRUE(sender.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto receiver = HeartbeatReceiver::Bind(endpoint);
  ASSERT_TRUE(receiver.ok()) << receiver.status().ToString();
  EXPECT_TRUE(Next(receiver->get(), 3000).has_value());
}

TEST(HeartbeatSenderTest, UnderSystemdSendsReadyThenWatchdogNotifications) {
  std::string path = ::testing::TempDir() + "/notify-" + std::to_string(::getpid());
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  timeval tv{3, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setenv("NOTIFY_SOCKET", path.c_str(), 1);
  auto sender = HeartbeatSender::Start({"", "reward", "0", 50, {}, {}});
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(sender.ok());
  ASSERT_NE(sender->get(), nullptr) << "systemd alone is a reason to beat";
  char buf[256];
  ssize_t n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, n).rfind("READY=1\n", 0), 0u) << std::string(buf, n);
  n = ::recv(fd, buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, n).rfind("WATCHDOG=1\n", 0), 0u) << std::string(buf, n);
  (*sender)->Stop();
  ::close(fd);
  ::unlink(path.c_str());
}

// A datagram socket standing in for systemd's $NOTIFY_SOCKET.
class FakeNotifySocket {
 public:
  FakeNotifySocket() : path_(::testing::TempDir() + "/notify-gate-" + std::to_string(::getpid())) {
    ::unlink(path_.c_str());
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
    bound_ = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    timeval tv{3, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~FakeNotifySocket() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  bool bound() const { return bound_; }
  const std::string& path() const { return path_; }
  // The next notification; "" after 3 s without one.
  std::string Next() {
    char buf[512];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, n) : "";
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

bool Pings(const std::string& note) { return note.rfind("WATCHDOG=1\n", 0) == 0; }

TEST(HeartbeatSenderTest, UnderSystemdAWorkPhaseWithoutProgressStopsTheWatchdogPingsUntilItMoves) {
  FakeNotifySocket systemd;
  ASSERT_TRUE(systemd.bound());
  EventLog events;
  events.SetPhase("train");
  SenderOptions o{"", "train", "0", 50, {}, {}};
  o.sd_watchdog.stall_ms = {{"train", 300}};
  ::setenv("NOTIFY_SOCKET", systemd.path().c_str(), 1);
  int64_t start = MonoMillis();
  auto sender = HeartbeatSender::Start(o);
  ::unsetenv("NOTIFY_SOCKET");
  ASSERT_TRUE(sender.ok());
  ASSERT_NE(sender->get(), nullptr);
  ASSERT_EQ(systemd.Next().rfind("READY=1\n", 0), 0u);
  // Nothing moves in phase train: pings for 300 ms, then STATUS lines without WATCHDOG=1.
  int pings = 0;
  std::string note;
  for (int i = 0; i < 100 && Pings(note = systemd.Next()); ++i) ++pings;
  EXPECT_GE(pings, 1);
  EXPECT_GE(MonoMillis() - start, 300);
  EXPECT_NE(note.find("STATUS=phase train step 0: no progress in phase train for"), std::string::npos) << note;
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(Pings(note = systemd.Next())) << note;
  // A micro-batch done: pings again.
  ++Progress().micro_batches;
  bool pinged = false;
  for (int i = 0; i < 20 && !pinged; ++i) pinged = Pings(systemd.Next());
  EXPECT_TRUE(pinged) << "progress moved";
  // Waiting for data is idle: pings with nothing moving, well past the threshold.
  events.SetPhase("waiting-for-data");
  for (int i = 0; i < 20 && (note = systemd.Next()).find("phase waiting-for-data") == std::string::npos; ++i) {
  }
  for (int i = 0; i < 15; ++i) EXPECT_TRUE(Pings(note = systemd.Next())) << note;
  (*sender)->Stop();
}

TEST(HeartbeatSenderTest, NoEndpointAndNoSystemdStartsNothing) {
  ::unsetenv("NOTIFY_SOCKET");
  auto sender = HeartbeatSender::Start({"", "train", "0", 1000, {}, {}});
  ASSERT_TRUE(sender.ok());
  EXPECT_EQ(sender->get(), nullptr);
  EXPECT_EQ(HeartbeatSender::Start({"nonsense", "train", "0", 1000, {}, {}}).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rl::health
