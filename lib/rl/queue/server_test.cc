#include "rl/queue/server.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "rl/core/clock.h"
#include "rl/queue/client.h"
#include "rl/wire/client.h"

namespace rl::queue {
namespace {

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

TEST(ProtocolTest, PutColumnPacksTheBodyPutPacksForTheSameRows) {
  std::vector<std::string> values = {"a", std::string(70000, 'b'), ""};
  PutRequest req;
  for (const auto& v : values) req.rows.push_back({std::nullopt, {{"payload", Bytes{v}}}});
  Message m = EncodePut(req);
  EXPECT_TRUE(m.blobs.empty());
  EXPECT_EQ(EncodePutColumn("payload", values), m.body);
}

TEST_F(ServerTest, PutGetAckOverARealSocket) {
  auto c = Client();
  auto idx = c.Put(Prompts(3));
  ASSERT_TRUE(idx.ok()) << idx.status().ToString();
  EXPECT_EQ(*idx, (std::vector<uint64_t>{0, 1, 2}));
  GetRequest g;
  g.task = "gen";
  g.count = 3;
  auto got = c.Get(g);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->rows.size(), 3u);
  EXPECT_EQ(std::get<std::string>(got->rows[1].columns[0].second), "p1");
  auto acked = c.Ack("gen", got->lease, {0, 1, 2});
  ASSERT_TRUE(acked.ok());
  EXPECT_EQ(acked->done.size(), 3u);
}

TEST_F(ServerTest, GetViewReadsTheRowsGetCopies) {
  auto c = Client();
  ASSERT_TRUE(c.PutColumn("prompt", {std::string(2000, 'a'), "b"}).ok());
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  auto got = c.GetView(g);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_NE(got->lease, 0u);
  ASSERT_EQ(got->rows.size(), 2u);
  EXPECT_EQ(got->rows[1].index, 1u);
  auto cols = MapView::Of(*got->rows[0].columns, "row");
  ASSERT_TRUE(cols.ok());
  const msgpack::object* v = cols->Find("prompt");
  ASSERT_NE(v, nullptr);
  ASSERT_EQ(v->type, msgpack::type::BIN);
  EXPECT_EQ(std::string(v->via.bin.ptr, v->via.bin.size), std::string(2000, 'a'));
  EXPECT_EQ(c.Ack("gen", got->lease, {0, 1}).value().done.size(), 2u);
}

TEST_F(ServerTest, MalformedInputGetsAnErrorReplyAndTheServerKeepsServing) {
  auto garbage = Raw({"hello"});
  ASSERT_TRUE(garbage.ok());
  EXPECT_EQ(garbage->header.status, static_cast<uint8_t>(Code::kProtocol));
  Message m;
  m.header = {77, 5, 1, "raw", 0, ""};
  auto unknown = Raw(EncodeRequest(m));
  ASSERT_TRUE(unknown.ok());
  EXPECT_EQ(unknown->header.status, static_cast<uint8_t>(Code::kProtocol));
  EXPECT_EQ(unknown->header.rid, 5u);
  m.header.op = static_cast<uint8_t>(Op::kPut);
  m.body = "\x81\xa4rows\x01";  // rows is not an array
  auto wrong_type = Raw(EncodeRequest(m));
  ASSERT_TRUE(wrong_type.ok());
  EXPECT_EQ(wrong_type->header.status, static_cast<uint8_t>(Code::kInvalidArgument));
  m.body = EmptyBody();
  m.blobs = {std::string(1 << 20, 'x')};
  auto big = Raw(EncodeRequest(m));
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->header.status, static_cast<uint8_t>(Code::kTooLarge));
  GetRequest g;
  g.task = "nope";
  EXPECT_EQ(Client().Get(g).status().code(), Code::kNotFound);
  EXPECT_EQ(Client().Ack("gen", 0, {12345}).value().rejected.size(), 1u);
  EXPECT_TRUE(Client().Ping().ok());
}

TEST_F(ServerTest, RetriedPutTakesEffectOnceEvenAcrossARestart) {
  Message m = EncodePut(Prompts(2));
  m.header = {static_cast<uint8_t>(Op::kPut), 99, 1, "writer-1", 0, ""};
  auto first = Raw(EncodeRequest(m));
  ASSERT_TRUE(first.ok());
  auto again = Raw(EncodeRequest(m));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->body, first->body);
  EXPECT_EQ(Rows(), 2u);
  Stop();
  Start();
  auto after = Raw(EncodeRequest(m));
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->body, first->body);
  EXPECT_EQ(Rows(), 2u);
}

TEST_F(ServerTest, RestartedWriterWithAStableSenderAddsRowsOnce) {
  auto writer = [&] {
    ClientOptions o;
    o.endpoint = endpoint_;
    o.sender = "feeder-of-run-1";  // stable across the writer's restarts
    return QueueClient(o);
  };
  auto first = writer().PutOnce(1000, Prompts(3));
  ASSERT_TRUE(first.ok());
  auto again = writer().PutOnce(1000, Prompts(3));  // "restarted", unsure whether it wrote
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *first);
  EXPECT_EQ(Rows(), 3u);
}

TEST_F(ServerTest, WaitingGetIsAnsweredWhenRowsArrive) {
  std::thread producer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(Client().Put(Prompts(2)).ok());
  });
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  g.wait_ms = 5000;
  int64_t start = MonoMillis();
  auto got = Client().Get(g);
  producer.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->rows.size(), 2u);
  EXPECT_LT(MonoMillis() - start, 4000) << "answered when the rows came, not at the deadline";
}

// A trainer's get that sends a stale row back for regeneration makes it ready for a rollout's get
// parked before it: the rollout is answered at once, not when its wait runs out.
TEST_F(ServerTest, ARowSentBackForRegenerationReachesAGetParkedBeforeTheOneThatSentIt) {
  PutRequest first;
  first.rows.push_back({std::nullopt, {{"prompt", std::string("p")}, {"version", int64_t{0}}}});
  ASSERT_TRUE(Client().Put(first).ok());
  GetRequest gen;
  gen.task = "gen";
  gen.count = 1;
  auto leased = Client().Get(gen);
  ASSERT_TRUE(leased.ok() && leased->rows.size() == 1u);
  ASSERT_TRUE(Client().Ack("gen", leased->lease, {0}).ok());
  gen.wait_ms = 8000;
  int64_t start = MonoMillis(), answered = 0;
  std::thread rollout([&] {  // parked first
    auto again = Client().Get(gen);
    answered = MonoMillis();
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->rows.size(), 1u);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  std::thread trainer([&] {  // parked second; wants version 1 or newer and regenerates older rows
    GetRequest train;
    train.task = "train";
    train.count = 1;
    train.wait_ms = 1000;
    train.has_min_version = true;
    train.min_version = 1;
    train.regenerate_stale = true;
    auto got = Client().Get(train);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->regenerated, 1u);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  PutRequest response;  // the response of version 0 completes the row for train
  response.rows.push_back({uint64_t{0}, {{"response", std::string("r")}}});
  ASSERT_TRUE(Client().Put(response).ok());
  trainer.join();
  rollout.join();
  EXPECT_LT(answered - start, 3000) << "answered when the row came back, not at the deadline";
}

// The get is parked on the server when it stops; the client hears of the lost connection and of
// ZeroMQ's reconnection to the new server from the socket monitor and sends the get again at
// once, instead of waiting out the attempt (3 s) and the server-side wait (5 s).
TEST_F(ServerTest, AWaitingGetIsSentAgainAsSoonAsTheRestartedServerIsBack) {
  ClientOptions o;
  o.endpoint = endpoint_;
  o.give_up_s = 20;
  o.attempt_timeout_ms = 3000;
  QueueClient waiter(o);
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  g.wait_ms = 5000;
  Result<GetReply> got = Status::Internal("not run");
  std::thread consumer([&] { got = waiter.Get(g); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // parked by now
  Stop();
  Start();
  int64_t restarted = MonoMillis();
  ASSERT_TRUE(Client().Put(Prompts(2)).ok());
  consumer.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->rows.size(), 2u);
  EXPECT_LT(MonoMillis() - restarted, 2000) << "sent again when the connection came back, not after the timeout";
  EXPECT_GE(waiter.wire().resends(), 1u);
}

// A role told to stop while its get waits on the server holds nothing: the call ends at once
// instead of after the wait (a full restart waited 5 s per role for that). Calls that do not wait
// on the server are not cut short by the flag.
TEST_F(ServerTest, AWaitingGetEndsSoonAfterTheClientsStopFlagIsSet) {
  std::atomic<bool> stop{false};
  ClientOptions o;
  o.endpoint = endpoint_;
  o.stop = &stop;
  QueueClient waiter(o);
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  g.wait_ms = 5000;
  Result<GetReply> got = Status::Internal("not run");
  std::thread consumer([&] { got = waiter.Get(g); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // parked by now
  stop = true;
  int64_t stopped = MonoMillis();
  consumer.join();
  EXPECT_LT(MonoMillis() - stopped, 1000);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kTimeout) << got.status().ToString();
  EXPECT_TRUE(waiter.Put(Prompts(1)).ok()) << "a put does not wait on the server: the flag does not end it";
}

// The server still holds a get its client gave up parked; giving back the holder's leases drops
// it, so rows put afterwards go to the gets of live processes, not to one nobody reads.
TEST_F(ServerTest, AGetGivenUpOnAStopIsDroppedByGivingBackItsHoldersLeases) {
  std::atomic<bool> stop{false};
  ClientOptions o;
  o.endpoint = endpoint_;
  o.stop = &stop;
  QueueClient waiter(o);
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  g.wait_ms = 5000;
  g.holder = "rollout/0";
  std::thread consumer([&] { (void)waiter.Get(g); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  stop = true;
  consumer.join();
  ASSERT_TRUE(waiter.ReleaseHolder("gen", "rollout/0").ok());
  auto c = Client();
  ASSERT_TRUE(c.Put(Prompts(2)).ok());
  g.wait_ms = 0;
  g.holder = "rollout/1";
  auto got = c.Get(g);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->rows.size(), 2u) << "the given-up get was served the rows";
}

TEST_F(ServerTest, StateSurvivesRestartAndATornLogTail) {
  auto c = Client();
  ASSERT_TRUE(c.Put(Prompts(5)).ok());
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  auto got = c.Get(g);
  ASSERT_TRUE(got.ok());
  ASSERT_TRUE(c.Ack("gen", got->lease, {got->rows[0].index, got->rows[1].index}).ok());
  ASSERT_TRUE(c.MetaSet({"cursor", "5", std::nullopt}).ok());
  Stop();
  std::ofstream(dir_ + "/wal-1.log", std::ios::app) << std::string("\x30\0\0\0garbage", 11);
  Start();
  auto stat = Client().Stat();
  ASSERT_TRUE(stat.ok());
  EXPECT_EQ((*stat)["rows"].get<uint64_t>(), 5u);
  EXPECT_EQ((*stat)["tasks"][0]["consumed"].get<uint64_t>(), 2u);
  EXPECT_EQ((*stat)["tasks"][0]["ready"].get<uint64_t>(), 3u);
  EXPECT_EQ(*Client().MetaGet("cursor").value(), "5");
  ASSERT_TRUE(Client().Put(Prompts(1)).ok()) << "the log accepts records after the cut";
}

// Large values go to the log as pieces of the request's frame: the log must still hold them.
TEST_F(ServerTest, LargePromptsSurviveARestartFromTheLog) {
  std::vector<std::string> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(std::string(3000 + 50000 * i, static_cast<char>('a' + i)));
  PutRequest req;
  for (const auto& p : prompts) req.rows.push_back({std::nullopt, {{"prompt", p}}});
  ASSERT_TRUE(Client().Put(req).ok());
  Stop();
  Start();
  GetRequest g;
  g.task = "gen";
  g.count = 4;
  auto got = Client().Get(g);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->rows.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(std::get<std::string>(got->rows[i].columns[0].second), prompts[i]);
}

TEST_F(ServerTest, SnapshotCompactsTheLogAndRecoveryUsesIt) {
  Stop();
  ServerOptions o;
  o.bind = endpoint_;
  o.dir = dir_;
  o.snapshot_bytes = 2000;  // every few puts
  o.declare = {{"gen", {"prompt"}}};
  auto s = Open(o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  server_ = std::move(*s);
  stop_ = false;
  thread_ = std::thread([this] { EXPECT_TRUE(server_->Run(stop_).ok()); });
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(Client().Put(Prompts(4)).ok());
  Stop();
  size_t logs = 0, snaps = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    std::string n = e.path().filename().string();
    logs += n.rfind("wal-", 0) == 0;
    snaps += n.rfind("snapshot-", 0) == 0;
  }
  EXPECT_EQ(snaps, 1u);
  EXPECT_EQ(logs, 1u);
  Start();
  EXPECT_EQ(Rows(), 80u);
}

// The log writer wakes the loop only when a held reply can go: were that wake-up lost, every put
// below would wait for the loop's 200 ms poll timeout (4 s in all); 20 of them take milliseconds.
TEST_F(ServerTest, HeldRepliesGoOutWhenTheLogCatchesUpUnderEveryPolicy) {
  for (FsyncPolicy policy : {FsyncPolicy::kAlways, FsyncPolicy::kBatch, FsyncPolicy::kNever}) {
    Stop();
    Start(policy);
    auto c = Client();
    int64_t start = MonoMillis();
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(c.Put(Prompts(2)).ok());
    EXPECT_LT(MonoMillis() - start, 2000) << FsyncPolicyName(policy);
  }
}

TEST_F(ServerTest, RetireAnswersParkedGetsFreesTheRowsAndTakesEffectOnceAcrossARestart) {
  auto c = Client();
  ASSERT_TRUE(c.Declare("audit", {"prompt", "verdict"}).ok());  // nothing ever puts a verdict
  ASSERT_TRUE(c.Put(Prompts(2)).ok());
  ASSERT_TRUE(c.Ack("gen", 0, {0, 1}).ok());
  ASSERT_TRUE(c.Ack("train", 0, {0, 1}).value().rejected.size() == 2);  // no response yet
  PutRequest responses;
  for (uint64_t i : {0, 1}) responses.rows.push_back({i, {{"response", std::string("r")}}});
  responses.ack_task = "";
  ASSERT_TRUE(c.Put(responses).ok());
  ASSERT_TRUE(c.Ack("train", 0, {0, 1}).ok());
  auto stat = c.Stat().value();
  EXPECT_EQ(stat["rows"], 2u);
  EXPECT_EQ(stat["tasks"][2]["name"], "audit");
  EXPECT_EQ(stat["tasks"][2]["holds"], 2u);
  EXPECT_EQ(stat["tasks"][0]["holds"], 0u);
  EXPECT_EQ(stat["tasks"][2]["optional"], false);

  Status parked;
  std::thread waiter([&] {
    GetRequest g;
    g.task = "audit";
    g.wait_ms = 5000;
    parked = Client().Get(g).status();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ClientOptions o;
  o.endpoint = endpoint_;
  o.sender = "retirer";
  rl::Client wire(o);
  int64_t start = MonoMillis();
  auto first = wire.CallWithRid(77, kOpRetire, EncodeRetire("audit").body);
  waiter.join();
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(parked.code(), Code::kNotFound) << parked.ToString();
  EXPECT_LT(MonoMillis() - start, 3000) << "the parked get is answered at once, not at its deadline";
  EXPECT_EQ(Rows(), 0u);
  Stop();
  Start();
  auto again = wire.CallWithRid(77, kOpRetire, EncodeRetire("audit").body);
  ASSERT_TRUE(again.ok()) << "a retry is answered as the first time, though the task is gone";
  EXPECT_EQ(again->body, first->body);
  EXPECT_EQ(Client().Retire("audit").status().code(), Code::kNotFound);
  stat = Client().Stat().value();
  EXPECT_EQ(stat["tasks"].size(), 2u);
  EXPECT_EQ(Client().Declare("audit", {"prompt"}, true).code(), Code::kOk);
  GetRequest g;
  g.task = "audit";
  g.columns = {"prompt"};
  EXPECT_TRUE(Client().Get(g).ok()) << "a get naming the columns of an optional task keeps it optional";
  EXPECT_EQ(Client().Stat().value()["tasks"][2]["optional"], true);
}

TEST_F(ServerTest, RequestsTheProtocolPageRefusesAreRefusedWithTheStatusItGives) {
  auto status = [&](uint8_t op, uint64_t rid, const std::string& from, std::string body) {
    Message m;
    m.header = {op, rid, 1, from, 0, ""};
    m.body = std::move(body);
    auto r = Raw(EncodeRequest(m));
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->header.rid, rid);
    return r.ok() ? static_cast<Code>(r->header.status) : Code::kInternal;
  };
  auto ping = static_cast<uint8_t>(Op::kPing);
  EXPECT_EQ(status(ping, 0, "raw", EmptyBody()), Code::kInvalidArgument) << "rid 0";
  EXPECT_EQ(status(ping, 1, std::string(257, 's'), EmptyBody()), Code::kInvalidArgument) << "from too long";
  EXPECT_EQ(status(ping, 2, std::string(256, 's'), EmptyBody()), Code::kOk);
  IndexRequest nack{"gen", 0, {}, ""};
  std::string body = EncodeIndices(nack).body;
  body[0] = static_cast<char>(0x84);  // a fourth key: "holder": ""
  body += std::string("\xa6holder\xa0", 8);
  EXPECT_EQ(status(static_cast<uint8_t>(Op::kNack), 3, "raw", body), Code::kInvalidArgument) << "holder ''";
  GetRequest g;
  g.task = "nosuch";
  g.count = 0;
  EXPECT_EQ(status(static_cast<uint8_t>(Op::kGet), 4, "raw", EncodeGet(g).body), Code::kInvalidArgument)
      << "count 0 is wrong whatever the task";
  g = GetRequest();
  g.task = "gen";
  g.columns = {"prompt", "version"};
  EXPECT_EQ(status(static_cast<uint8_t>(Op::kGet), 5, "raw", EncodeGet(g).body), Code::kConflict);
  g.columns = {"prompt", "lease"};
  EXPECT_EQ(status(static_cast<uint8_t>(Op::kGet), 6, "raw", EncodeGet(g).body), Code::kInvalidArgument)
      << "a column no row can have, before the conflict";
  EXPECT_EQ(status(static_cast<uint8_t>(Op::kDeclare), 7, "raw", EncodeDeclare({"d", {"a", "a"}}).body),
            Code::kInvalidArgument);
  EXPECT_EQ(status(static_cast<uint8_t>(kOpRetire), 8, "raw", EncodeRetire("nosuch").body), Code::kNotFound);
  // Nesting past 8 levels in a key the op does not know is still a body that breaks a limit.
  std::string deep = "\x82\xa3key\xa3gen\xa5extra" + std::string(8, '\x91') + "\x01";
  EXPECT_EQ(status(static_cast<uint8_t>(Op::kMetaGet), 9, "raw", deep), Code::kProtocol);
}

// A multi-turn rollout's row: progress written after each turn by update puts, exactly once per
// rid (a retry does not renew the lease again), and handed back with the prompt to whoever leases
// the row after the lease ended, across a restart of the server.
TEST_F(ServerTest, UpdatesApplyOnceSurviveARestartAndComeBackWithTheRowViaAlso) {
  ASSERT_TRUE(Client().Put(Prompts(2)).ok());
  ClientOptions o;
  o.endpoint = endpoint_;
  o.sender = "rollout/0";  // stable: the rids below are the rollout's own
  GetRequest g;
  g.task = "gen";
  g.count = 2;
  g.lease_ms = 1500;
  auto leased = QueueClient(o).Get(g);
  ASSERT_TRUE(leased.ok()) << leased.status().ToString();
  ASSERT_EQ(leased->rows.size(), 2u);
  PutRequest turn;
  turn.update_task = "gen";
  turn.update_lease = leased->lease;
  turn.renew_ms = 1000;
  turn.rows.push_back({uint64_t{0}, {{"progress", std::string("turn 1")}}});
  auto first = QueueClient(o).UpdateOnce(501, turn);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  turn.rows[0].columns[0].second = std::string("turn 2");
  auto second = QueueClient(o).UpdateOnce(502, turn);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto retried = QueueClient(o).UpdateOnce(502, turn);
  ASSERT_TRUE(retried.ok());
  EXPECT_EQ(*retried, *second) << "the same reply: the lease is not renewed again";
  EXPECT_GT(*second, *first);
  Stop();
  Start();
  auto after = QueueClient(o).UpdateOnce(502, turn);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ(*after, *second) << "also after a restart";
  PutRequest plain;  // an update's fields are checked by the server too
  plain.rows = turn.rows;
  plain.update_task = "gen";
  plain.update_lease = leased->lease;
  plain.ack_task = "gen";
  EXPECT_EQ(Client().Put(plain).status().code(), Code::kInvalidArgument);
  plain.ack_task.clear();
  plain.rows[0].columns[0].first = "prompt";
  EXPECT_EQ(Client().Put(plain).status().code(), Code::kConflict);
  EXPECT_EQ(Client().Update(PutRequest()).status().code(), Code::kInvalidArgument) << "an update names its task";

  // The rollout died: the lease ends and the next one gets the row back with its progress.
  GetRequest next = g;
  next.also = {"progress"};
  next.wait_ms = 5000;
  auto got = Client().GetView(next);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_GE(WallMillis(), *second - 200) << "not before the renewed deadline";
  ASSERT_EQ(got->rows.size(), 2u);
  auto row0 = MapView::Of(*got->rows[0].columns, "row");
  ASSERT_TRUE(row0.ok());
  ASSERT_NE(row0->Find("progress"), nullptr);
  EXPECT_EQ(AsString(*row0->Find("progress"), "progress").value(), "turn 2");
  EXPECT_EQ(MapView::Of(*got->rows[1].columns, "row")->Find("progress"), nullptr);
}

// A get retried with its rid hands out the columns the first one asked for, also after a restart.
TEST_F(ServerTest, ARetriedGetReturnsTheSameAlsoColumnsAcrossARestart) {
  PutRequest rows = Prompts(1);
  ASSERT_TRUE(Client().Put(rows).ok());
  PutRequest note;
  note.rows.push_back({uint64_t{0}, {{"note", std::string("n")}}});
  ASSERT_TRUE(Client().Put(note).ok());
  GetRequest g;
  g.task = "gen";
  g.also = {"note"};
  Message m = EncodeGet(g);
  m.header = {static_cast<uint8_t>(Op::kGet), 77, 1, "getter", 0, ""};
  auto first = Raw(EncodeRequest(m));
  ASSERT_TRUE(first.ok());
  auto reply = DecodeGetReply(*first);
  ASSERT_TRUE(reply.ok());
  ASSERT_EQ(reply->rows.size(), 1u);
  ASSERT_EQ(reply->rows[0].columns.size(), 2u);
  EXPECT_EQ(reply->rows[0].columns[1].first, "note");
  Stop();
  Start();
  g.also.clear();  // the retry's body is not looked at
  m.body = EncodeGet(g).body;
  auto again = Raw(EncodeRequest(m));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->body, first->body);
}

TEST_F(ServerTest, ClientGivesUpWithUnavailableWhenNoServerAnswers) {
  Stop();
  ClientOptions o;
  o.endpoint = endpoint_;
  o.give_up_s = 0.5;
  o.attempt_timeout_ms = 200;
  QueueClient c(o);
  EXPECT_EQ(c.Ping().code(), Code::kUnavailable);
}

}  // namespace
}  // namespace rl::queue
