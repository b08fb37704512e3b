// QueuePipeline and rl::Pipeline against a real rl-queue server on 127.0.0.1: replies matched to
// their requests, one sender id per request in flight, and retries (a server that starts late, a
// proxy that drops replies) that take effect once.
#include "rl/queue/pipeline.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "rl/core/clock.h"
#include "rl/queue/client.h"
#include "rl/queue/server.h"

namespace rl::queue {
namespace {

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rlq-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    Stop();
    std::filesystem::remove_all(dir_);
  }
  void Start(const std::string& bind = "tcp://127.0.0.1:0") {
    ServerOptions o;
    o.bind = bind;
    o.dir = dir_;
    o.fsync = FsyncPolicy::kBatch;
    o.declare = {{"gen", {"prompt"}}};
    int64_t give_up = MonoMillis() + 3000;  // ZeroMQ's reaper releases a stopped server's port a moment later
    auto s = Server::Open(o);
    while (!s.ok() && s.status().code() == Code::kUnavailable && MonoMillis() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      s = Server::Open(o);
    }
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    endpoint_ = server_->endpoint();
    stop_ = false;
    thread_ = std::thread([this] { EXPECT_TRUE(server_->Run(stop_).ok()); });
  }
  void Stop() {
    if (!thread_.joinable()) return;
    stop_ = true;
    thread_.join();
    server_.reset();
  }
  ClientOptions Options(const std::string& endpoint, double give_up_s = 10) {
    ClientOptions o;
    o.endpoint = endpoint;
    o.give_up_s = give_up_s;
    o.attempt_timeout_ms = 300;
    o.backoff_max_ms = 200;
    return o;
  }
  nlohmann::json Gen() {
    auto stat = QueueClient(Options(endpoint_)).Stat();
    EXPECT_TRUE(stat.ok());
    for (const auto& t : (*stat)["tasks"]) {
      if (t["name"] == "gen") return t;
    }
    return {};
  }
  static PutRequest Prompts(int n, int from) {
    PutRequest req;
    for (int i = 0; i < n; ++i) req.rows.push_back({std::nullopt, {{"prompt", "p" + std::to_string(from + i)}}});
    return req;
  }
  // Puts `requests` requests of 1, 2, 3, ... rows through p, collecting whenever it is full;
  // returns every reply's indices in collection order.
  static std::vector<std::vector<uint64_t>> PutMany(QueuePipeline& p, int requests) {
    std::vector<std::vector<uint64_t>> out;
    auto collect = [&] {
      auto r = p.Collect();
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      out.push_back(r.ok() ? r->done : std::vector<uint64_t>{});
    };
    for (int i = 0; i < requests; ++i) {
      if (p.full()) collect();
      EXPECT_TRUE(p.SubmitPut(Prompts(i % 5 + 1, i * 10)).ok());
    }
    while (p.pending() > 0) collect();
    return out;
  }

  std::string dir_, endpoint_;
  std::unique_ptr<Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(PipelineTest, RepliesMatchTheirRequestsAndComeBackInSubmissionOrder) {
  Start();
  QueuePipeline p(Options(endpoint_), 4);
  auto replies = PutMany(p, 20);
  ASSERT_EQ(replies.size(), 20u);
  uint64_t next = 0, rows = 0;
  for (int i = 0; i < 20; ++i) {
    ASSERT_EQ(replies[i].size(), static_cast<size_t>(i % 5 + 1)) << "reply " << i << " is another request's";
    for (uint64_t index : replies[i]) EXPECT_EQ(index, next++) << "carried out in submission order";
    rows += replies[i].size();
  }
  EXPECT_EQ(Gen()["ready"].get<uint64_t>(), rows);
  EXPECT_EQ(p.wire().retries(), 0u);
}

TEST_F(PipelineTest, AcksInFlightTogetherEachConsumeTheirRowsAndAnErrorStaysWithItsRequest) {
  Start();
  QueueClient c(Options(endpoint_));
  ASSERT_TRUE(c.Put(Prompts(8, 0)).ok());
  GetRequest g;
  g.task = "gen";
  g.count = 8;
  auto got = c.Get(g);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->rows.size(), 8u);
  QueuePipeline p(Options(endpoint_), 8);
  for (int i = 0; i < 4; ++i) p.SubmitAck("gen", got->lease, {got->rows[2 * i].index, got->rows[2 * i + 1].index});
  p.SubmitAck("no-such-task", got->lease, {got->rows[0].index});
  p.SubmitNack("gen", got->lease, {got->rows[0].index});  // acked already: rejected
  for (int i = 0; i < 4; ++i) {
    auto r = p.Collect();
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->done, (std::vector<uint64_t>{got->rows[2 * i].index, got->rows[2 * i + 1].index}));
  }
  EXPECT_EQ(p.Collect().status().code(), Code::kNotFound);
  auto nack = p.Collect();
  ASSERT_TRUE(nack.ok());
  EXPECT_EQ(nack->rejected, std::vector<uint64_t>{got->rows[0].index});
  EXPECT_EQ(Gen()["consumed"].get<uint64_t>(), 8u);
}

TEST_F(PipelineTest, RequestsSentBeforeTheServerStartsTakeEffectOnceWhenItComesUp) {
  Start();
  std::string endpoint = endpoint_;  // the port, kept for the server started again below
  Stop();
  std::vector<std::vector<uint64_t>> replies;
  std::thread writer([&] {
    QueuePipeline p(Options(endpoint), 4);
    replies = PutMany(p, 10);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // several attempts time out
  Start(endpoint);
  writer.join();
  ASSERT_EQ(replies.size(), 10u);
  std::set<uint64_t> distinct;
  for (const auto& r : replies) distinct.insert(r.begin(), r.end());
  EXPECT_EQ(distinct.size(), 30u);
  EXPECT_EQ(Gen()["ready"].get<uint64_t>(), 30u) << "each request once";
}

// A get parked on the server holds its lane; when the server is restarted, the pipeline hears the
// connection come back and sends what waits again at once, not after the attempt timeout.
TEST_F(PipelineTest, RequestsWaitingAreSentAgainAsSoonAsTheRestartedServerIsBack) {
  Start();
  ClientOptions o = Options(endpoint_);
  o.attempt_timeout_ms = 3000;
  QueuePipeline p(o, 2);
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  g.wait_ms = 5000;
  p.wire().Submit(Op::kGet, EncodeGet(g).body, {}, g.wait_ms);
  ASSERT_TRUE(p.SubmitPut(Prompts(1, 0)).ok());  // on the other lane, while the get waits on the first
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Stop();
  Start(endpoint_);
  int64_t restarted = MonoMillis();
  ASSERT_TRUE(QueueClient(Options(endpoint_)).Put(Prompts(1, 1)).ok());
  auto got = p.wire().Collect();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  Message m;
  m.body.assign(got->body);
  auto reply = DecodeGetReply(m);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->rows.size(), 2u) << "the put before the restart and the one after";
  EXPECT_LT(MonoMillis() - restarted, 2000) << "sent again when the connection came back, not after the timeout";
  EXPECT_GE(p.wire().resends(), 1u);
  auto put = p.Collect();
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(put->done, std::vector<uint64_t>{0});
}

TEST_F(PipelineTest, WithNoServerEveryRequestGivesUpWithUnavailable) {
  Start();
  std::string endpoint = endpoint_;
  Stop();
  QueuePipeline p(Options(endpoint, 0.8), 3);
  int64_t start = MonoMillis();
  for (int i = 0; i < 3; ++i) p.SubmitAck("gen", 1, {1});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(p.Collect().status().code(), Code::kUnavailable);
  EXPECT_LT(MonoMillis() - start, 3000);
}

// A proxy between the pipeline and the server that drops the first reply to every rid, and
// records which sender sent each rid.
class DroppingProxy {
 public:
  explicit DroppingProxy(const std::string& server) {
    front_.set(zmq::sockopt::linger, 0);
    back_.set(zmq::sockopt::linger, 0);
    front_.bind("tcp://127.0.0.1:*");
    back_.connect(server);
    endpoint_ = front_.get(zmq::sockopt::last_endpoint);
    thread_ = std::thread([this] { Run(); });
  }
  ~DroppingProxy() {
    stop_ = true;
    thread_.join();
  }
  const std::string& endpoint() const { return endpoint_; }
  // rid -> every sender id it came from.
  std::map<uint64_t, std::set<std::string>> senders;
  std::map<uint64_t, int> sends;
  int dropped = 0;

 private:
  void Run() {
    std::string peer;
    std::set<uint64_t> answered;
    while (!stop_) {
      zmq::pollitem_t items[2] = {{front_.handle(), 0, ZMQ_POLLIN, 0}, {back_.handle(), 0, ZMQ_POLLIN, 0}};
      zmq::poll(items, 2, std::chrono::milliseconds(20));
      if (items[0].revents & ZMQ_POLLIN) {
        auto parts = Recv(front_);
        peer = parts[0].to_string();  // one client: the latest connection of it
        auto h = DecodeRequestHeader(parts[1].to_string_view(), parts[2].to_string_view());
        if (h.ok()) {
          senders[h->rid].insert(h->from);
          ++sends[h->rid];
        }
        Send(back_, parts, 1);
      }
      if (items[1].revents & ZMQ_POLLIN) {
        auto parts = Recv(back_);
        auto h = DecodeReplyHeader(parts[0].to_string_view(), parts[1].to_string_view());
        if (h.ok() && answered.insert(h->rid).second) {
          ++dropped;
          continue;
        }
        front_.send(zmq::buffer(peer), zmq::send_flags::sndmore);
        Send(front_, parts, 0);
      }
    }
  }
  static std::vector<zmq::message_t> Recv(zmq::socket_t& s) {
    std::vector<zmq::message_t> parts;
    do {
      parts.emplace_back();
      (void)s.recv(parts.back());
    } while (parts.back().more());
    return parts;
  }
  static void Send(zmq::socket_t& s, std::vector<zmq::message_t>& parts, size_t from) {
    for (size_t i = from; i < parts.size(); ++i) {
      s.send(parts[i], i + 1 < parts.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
  }

  zmq::socket_t front_{ZmqContext(), zmq::socket_type::router};
  zmq::socket_t back_{ZmqContext(), zmq::socket_type::dealer};
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(PipelineTest, ALostReplyIsRetriedOnItsLaneWithItsRidAndTakesEffectOnce) {
  Start();
  std::map<uint64_t, std::set<std::string>> senders;
  std::map<uint64_t, int> sends;
  std::vector<std::vector<uint64_t>> replies;
  uint64_t retries = 0;
  {
    DroppingProxy proxy(endpoint_);
    QueuePipeline p(Options(proxy.endpoint()), 4);
    replies = PutMany(p, 8);
    retries = p.wire().retries();
    EXPECT_EQ(proxy.dropped, 8);
    senders = proxy.senders;
    sends = proxy.sends;
  }
  ASSERT_EQ(replies.size(), 8u);
  EXPECT_GE(retries, 8u);
  std::set<uint64_t> distinct;
  for (const auto& r : replies) distinct.insert(r.begin(), r.end());
  EXPECT_EQ(Gen()["ready"].get<uint64_t>(), distinct.size()) << "no request carried out twice";
  ASSERT_EQ(senders.size(), 8u);
  for (const auto& [rid, from] : senders) {
    EXPECT_EQ(from.size(), 1u) << "rid " << rid << " retried under another sender id";
    EXPECT_GE(sends[rid], 2) << "rid " << rid << " was not sent again";
  }
  // The first four went out together, so on four different lanes.
  std::set<std::string> first_four;
  for (auto it = senders.begin(); it != std::next(senders.begin(), 4); ++it) first_four.insert(*it->second.begin());
  EXPECT_EQ(first_four.size(), 4u);
}

}  // namespace
}  // namespace rl::queue
