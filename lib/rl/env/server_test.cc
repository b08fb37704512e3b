// rl-env's server in this process, over TCP on 127.0.0.1: results in order, pings answered while
// calls run, and a retried request (same sender, same rid) never running its calls twice.
#include "rl/env/server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <future>
#include <thread>

#include "rl/core/clock.h"
#include "rl/env/client.h"

namespace rl::env {
namespace {

class ServerTest : public ::testing::Test {
 protected:
  void Start(std::map<std::string, std::string> tools) {
    ServerOptions o;
    o.bind = "tcp://127.0.0.1:0";
    o.pool.tools = std::move(tools);
    o.pool.workers = 2;
    o.pool.limits.timeout_ms = 3000;
    o.pool.limits.network = NetworkIsolation::kOff;
    auto s = Server::Open(std::move(o));
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    thread_ = std::thread([this] { (void)server_->Run(stop_); });
  }
  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  ClientOptions Options(const std::string& sender = "") const {
    ClientOptions o;
    o.endpoint = server_->endpoint();
    o.sender = sender;
    o.give_up_s = 10;
    return o;
  }

  std::atomic<bool> stop_{false};
  std::unique_ptr<Server> server_;
  std::thread thread_;
};

// Answers "A" after 0.5 s when the arguments are "a", else "other" at once.
constexpr char kUpper[] = "while read -r l; do case \"$l\" in *'\"arguments\":\"a\"'*) sleep 0.5; "
                          "echo '{\"output\": \"A\"}';; *) echo '{\"output\": \"other\"}';; esac; done";

TEST_F(ServerTest, ResultsComeInTheOrderOfTheCalls) {
  Start({{"t", kUpper}});
  EnvClient client(Options(), 3000);
  auto r = client.Call({{"t", "\"a\""}, {"t", "\"b\""}, {"nope", "1"}, {"t", "\"a\""}});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), 4u);
  EXPECT_EQ((*r)[0].output, "A");
  EXPECT_EQ((*r)[1].output, "other");
  EXPECT_EQ((*r)[2].kind, kKindUnknownTool);
  EXPECT_EQ((*r)[3].output, "A");
  EXPECT_LT(client.last_seconds(), 0.9) << "the two slow calls (0.5 s each) ran in parallel";
  auto empty = client.Call({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
}

// A turn of a large rollout makes more calls than rl-env takes in one request (4096): the client
// sends them in parts, and the results still come back one per call, in order.
TEST_F(ServerTest, MoreCallsThanARequestTakesGoInPartsInOrder) {
  Start({{"t", kUpper}});
  EnvClient client(Options(), 3000);
  std::vector<ToolCall> calls;
  for (size_t i = 0; i < kMaxCallsPerRequest + 3; ++i) calls.push_back({i % 2 ? "t" : "nope", "\"b\""});
  auto r = client.Call(calls);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    if (i % 2) {
      EXPECT_EQ((*r)[i].output, "other") << i;
    } else {
      EXPECT_EQ((*r)[i].kind, kKindUnknownTool) << i;
    }
  }
}

TEST_F(ServerTest, PingsAreAnsweredWhileCallsRun) {
  Start({{"sleepy", "while read -r l; do sleep 1; echo '{\"output\": \"z\"}'; done"}});
  auto slow = std::async(std::launch::async, [this] {
    EnvClient client(Options(), 3000);
    return client.Call({{"sleepy", "1"}, {"sleepy", "2"}});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Client ping(Options());
  int64_t start = MonoMillis();
  auto reply = ping.Call(Op::kPing, EmptyBody());
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_LT(MonoMillis() - start, 300);
  auto p = DecodePingReply(reply->body);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tools, std::vector<std::string>{"sleepy"});
  EXPECT_EQ(p->workers, 2u);
  auto r = slow.get();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)[1].output, "z");
}

TEST_F(ServerTest, ARetriedRequestRunsItsCallsOnce) {
  std::string counter = ::testing::TempDir() + "/env-runs-" + std::to_string(::getpid());
  std::remove(counter.c_str());
  Start({{"count", "while read -r l; do echo x >> " + counter + "; sleep 0.5; echo '{\"output\": \"done\"}'; done"}});
  auto runs = [&] {
    std::ifstream f(counter);
    return std::count(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>(), '\n');
  };
  std::string body = EncodeCallRequest({{"count", "1"}});
  // The first attempt, then the same request again (another connection, as after a reconnect)
  // while it runs: both get the reply, the tool ran once.
  ClientOptions short_lived = Options("s1");
  short_lived.give_up_s = 1;  // its reply goes to the retry's connection: it gives up
  auto first = std::async(std::launch::async, [&] { return Client(short_lived).CallWithRid(7, kOpToolCall, body); });
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  auto again = Client(Options("s1")).CallWithRid(7, kOpToolCall, body);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto a = DecodeCallReply(again->body);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->results[0].output, "done");
  // The first connection was replaced by the second: its reply went there.
  auto late = Client(Options("s1")).CallWithRid(7, kOpToolCall, body);  // after it finished: kept
  ASSERT_TRUE(late.ok());
  EXPECT_EQ(late->body, again->body);
  EXPECT_EQ(runs(), 1);
  auto fresh = Client(Options("s1")).CallWithRid(8, kOpToolCall, body);  // a new rid runs
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(runs(), 2);
  auto other = Client(Options("s2")).CallWithRid(7, kOpToolCall, body);  // another sender's rid 7
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(runs(), 3);
  EXPECT_EQ(first.get().status().code(), Code::kUnavailable);
  EXPECT_EQ(runs(), 3);
  std::remove(counter.c_str());
}

TEST_F(ServerTest, BadRequestsGetAnErrorStatus) {
  Start({{"t", kUpper}});
  Client c(Options());
  EXPECT_EQ(c.Call(kOpToolCall, "\xc1").status().code(), Code::kProtocol);
  EXPECT_EQ(c.Call(static_cast<Op>(3), EmptyBody()).status().code(), Code::kProtocol);
  EXPECT_EQ(c.Call(kOpToolCall, EmptyBody()).status().code(), Code::kProtocol);  // no calls
}

}  // namespace
}  // namespace rl::env
