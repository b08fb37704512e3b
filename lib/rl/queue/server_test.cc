// rl-queue's server over a real socket: requests and their replies, malformed input, waiting gets,
// retire and refusals. What survives a restart is in server_recovery_test.cc.
#include <gtest/gtest.h>

#include <thread>

#include "rl/queue/server.h"
#include "rl/queue/server_test_fixture.h"

namespace rl::queue {
namespace {

using server_fixture::ServerTest;
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

TEST_F(ServerTest, WaitingGetIsAnsweredWhenRowsArrive) {
  std::thread producer([this] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_TRUE(Client().Put(Prompts(2)).ok());
  });
  GetRequest g = WaitingGet();
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

// A role told to stop while its get waits on the server holds nothing: the call ends at once
// instead of after the wait (a full restart waited 5 s per role for that). Calls that do not wait
// on the server are not cut short by the flag.
TEST_F(ServerTest, AWaitingGetEndsSoonAfterTheClientsStopFlagIsSet) {
  std::atomic<bool> stop{false};
  ClientOptions o;
  o.endpoint = endpoint_;
  o.stop = &stop;
  QueueClient waiter(o);
  GetRequest g = WaitingGet();
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
  GetRequest g = WaitingGet();
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
  std::string deep = "\x82\xa3key\xa3gen\xa5" "extra" + std::string(8, '\x91') + "\x01";
  EXPECT_EQ(status(static_cast<uint8_t>(Op::kMetaGet), 9, "raw", deep), Code::kProtocol);
}

// Two consumers meet after every balanced get (a data-parallel trainer's ranks): the one whose
// part of a round came out empty is answered at once, not after its whole wait.
TEST_F(ServerTest, AnEmptyPartOfABalancedRoundIsHandedOutAtOnce) {
  QueueClient c = Client();
  ASSERT_TRUE(c.Put(Prompts(1)).ok());
  GetRequest g;
  g.task = "gen";
  g.count = 1;
  g.parts = 2;
  g.balance = "prompt";
  g.wait_ms = 0;
  auto first = c.Get(g);  // one row for two parts: [the row, nothing]
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->rows.size(), 1u);
  g.wait_ms = 5000;
  int64_t t0 = MonoMillis();
  auto second = c.Get(g);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_TRUE(second->rows.empty());
  EXPECT_EQ(second->lease, 0u);
  EXPECT_LT(MonoMillis() - t0, 2000) << "the empty part waited for rows";
  // Claimed once: the next balanced get waits for rows as any get does, and a plain get never
  // takes an empty part.
  ASSERT_TRUE(c.Put(Prompts(1)).ok());
  g.wait_ms = 0;
  ASSERT_EQ(c.Get(g)->rows.size(), 1u);  // a new round: [the row, nothing]
  GetRequest plain = g;
  plain.parts = 1;
  plain.balance.clear();
  plain.wait_ms = 300;
  t0 = MonoMillis();
  EXPECT_TRUE(c.Get(plain)->rows.empty());
  EXPECT_GE(MonoMillis() - t0, 250);
  g.wait_ms = 5000;
  EXPECT_TRUE(c.Get(g)->rows.empty());  // the round's empty part, still owed
  g.wait_ms = 300;
  t0 = MonoMillis();
  EXPECT_TRUE(c.Get(g)->rows.empty());
  EXPECT_GE(MonoMillis() - t0, 250) << "a part was handed out twice";
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
