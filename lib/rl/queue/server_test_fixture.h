// The fixture the rl-queue server tests share: a real server on 127.0.0.1 in a thread of the
// test, over a real directory, restartable on the same port; clients and raw frames to talk to it.
// Not part of any library.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "rl/core/clock.h"
#include "rl/queue/client.h"
#include "rl/queue/server.h"
#include "rl/wire/client.h"

namespace rl::queue::server_fixture {

// A real server on 127.0.0.1 in a thread, over a real directory.
class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rlq-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    Start();
  }
  void TearDown() override {
    Stop();
    std::filesystem::remove_all(dir_);
  }
  void Start(FsyncPolicy fsync = FsyncPolicy::kBatch) {
    ServerOptions o;
    o.bind = endpoint_.empty() ? "tcp://127.0.0.1:0" : endpoint_;
    o.dir = dir_;
    o.fsync = fsync;
    o.max_message = 1 << 20;
    o.declare = {{"gen", {"prompt"}}, {"train", {"prompt", "response"}}};
    auto s = Open(o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    endpoint_ = server_->endpoint();
    stop_ = false;
    thread_ = std::thread([this] { EXPECT_TRUE(server_->Run(stop_).ok()); });
  }
  // The port of a server just stopped is released by ZeroMQ's reaper thread a moment later.
  static Result<std::unique_ptr<Server>> Open(const ServerOptions& o) {
    int64_t give_up = MonoMillis() + 3000;
    while (true) {
      auto s = Server::Open(o);
      if (s.ok() || s.status().code() != Code::kUnavailable || MonoMillis() > give_up) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  void Stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    server_.reset();
  }
  QueueClient Client(double give_up_s = 10) {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.give_up_s = give_up_s;
    o.attempt_timeout_ms = 1000;
    return QueueClient(o);
  }
  // Sends raw frames on a fresh DEALER and returns the decoded reply.
  Result<Message> Raw(const std::vector<std::string>& frames) {
    zmq::socket_t s(ZmqContext(), zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    s.set(zmq::sockopt::rcvtimeo, 3000);
    s.connect(endpoint_);
    for (size_t i = 0; i < frames.size(); ++i) {
      s.send(zmq::buffer(frames[i]), i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    std::vector<std::string> reply;
    zmq::message_t part;
    do {
      if (!s.recv(part)) return Status::Timeout("no reply");
      reply.emplace_back(static_cast<const char*>(part.data()), part.size());
    } while (part.more());
    return DecodeReply(reply);
  }
  uint64_t Rows() {
    auto stat = Client().Stat();
    EXPECT_TRUE(stat.ok());
    return (*stat)["rows"].get<uint64_t>();
  }
  // A get of two "gen" rows that waits up to 5 s: on an empty queue it parks at the server.
  static GetRequest WaitingGet() {
    GetRequest g;
    g.task = "gen";
    g.count = 2;
    g.wait_ms = 5000;
    return g;
  }
  static PutRequest Prompts(int n) {
    PutRequest req;
    for (int i = 0; i < n; ++i) req.rows.push_back({std::nullopt, {{"prompt", std::string("p") + std::to_string(i)}}});
    return req;
  }

  std::string dir_, endpoint_;
  std::unique_ptr<Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rl::queue::server_fixture
