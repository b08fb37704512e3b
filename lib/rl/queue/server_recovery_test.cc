// rl-queue's server across restarts: retried requests take effect once, the log (torn tail,
// snapshot, large rows, fsync policies) brings the state back, waiting gets come back.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "rl/queue/server.h"
#include "rl/queue/server_test_fixture.h"

namespace rl::queue {
namespace {

using server_fixture::ServerTest;

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

// The get is parked on the server when it stops; the client hears of the lost connection and of
// ZeroMQ's reconnection to the new server from the socket monitor and sends the get again at
// once, instead of waiting out the attempt (3 s) and the server-side wait (5 s).
TEST_F(ServerTest, AWaitingGetIsSentAgainAsSoonAsTheRestartedServerIsBack) {
  ClientOptions o;
  o.endpoint = endpoint_;
  o.give_up_s = 20;
  o.attempt_timeout_ms = 3000;
  QueueClient waiter(o);
  GetRequest g = WaitingGet();
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

// A kill -9 while a snapshot starts (DurableStore::StartSnapshot): the next log exists, and the
// old one still ends in the zeros its direct writes padded the last block with, which only its
// clean close cuts. Nothing was written there, so recovery reads on; the bytes of any other tail
// in a log before the last are a record lost, and recovery refuses them.
TEST_F(ServerTest, ALogStillPaddedWhenTheNextBeganIsReadWhole) {
  ASSERT_TRUE(Client().Put(Prompts(5)).ok());
  Stop();
  const std::string old_log = dir_ + "/wal-1.log";
  const auto size = std::filesystem::file_size(old_log);
  ASSERT_GT(size % 4096, 0u);
  std::filesystem::resize_file(old_log, size + (4096 - size % 4096));  // zeros
  std::ofstream(dir_ + "/wal-2.log").flush();
  Start();
  EXPECT_EQ(Rows(), 5u);
  ASSERT_TRUE(Client().Put(Prompts(1)).ok());
  Stop();
  std::filesystem::resize_file(old_log, size + 5);  // a tail of zeros, but not a block's padding
  ServerOptions o;
  o.bind = endpoint_;
  o.dir = dir_;
  auto refused = Server::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kCorruption) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("later logs exist"), std::string::npos) << refused.status().ToString();
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

}  // namespace
}  // namespace rl::queue
