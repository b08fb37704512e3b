// A real rl-queue server on 127.0.0.1 in a thread of the test, over a temporary directory (the
// tests of rl-reward and rl-rollout run their loops against it). Not part of any library.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "rl/queue/client.h"
#include "rl/queue/server.h"

namespace rl::testing {

class TestQueue {
 public:
  // `declare`: the tasks to declare at start, as the pipeline would.
  explicit TestQueue(std::vector<queue::DeclareRequest> declare) {
    dir_ = ::testing::TempDir() + "/rlq-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    queue::ServerOptions o;
    o.bind = "tcp://127.0.0.1:0";
    o.dir = dir_;
    o.fsync = queue::FsyncPolicy::kNever;
    o.declare = std::move(declare);
    auto s = queue::Server::Open(o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    if (!s.ok()) return;
    server_ = std::move(*s);
    thread_ = std::thread([this] { EXPECT_TRUE(server_->Run(stop_).ok()); });
  }
  ~TestQueue() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  ClientOptions Options(double give_up_s = 10) const {
    ClientOptions o;
    o.endpoint = server_ ? server_->endpoint() : "tcp://127.0.0.1:1";
    o.give_up_s = give_up_s;
    o.attempt_timeout_ms = 2000;
    return o;
  }
  queue::QueueClient Client() const { return queue::QueueClient(Options()); }
  // The stat of one task: ready, leased, consumed, ...
  nlohmann::json Task(const std::string& name) const {
    auto stat = Client().Stat();
    EXPECT_TRUE(stat.ok());
    if (stat.ok()) {
      for (const auto& t : (*stat)["tasks"]) {
        if (t["name"] == name) return t;
      }
    }
    return nlohmann::json::object();
  }

 private:
  std::string dir_;
  std::unique_ptr<queue::Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace rl::testing
