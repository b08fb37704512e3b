// What multi-turn rollouts need of the queue: update puts (columns written into rows a lease holds,
// replacing values, the lease renewed) and gets that hand out further columns (`also`) when rows
// have them; both as they replay from the log and from snapshots.
#include <gtest/gtest.h>

#include "rl/queue/protocol.h"
#include "rl/queue/store.h"
#include "rl/queue/store_test_rows.h"

namespace rl::queue {
namespace {

using testing::AddTo;
using testing::NewRow;

GetRequest GetOf(const std::string& task, uint32_t count = 1, int64_t lease_ms = 1000) {
  GetRequest req;
  req.task = task;
  req.count = count;
  req.lease_ms = lease_ms;
  return req;
}

class StoreUpdateTest : public ::testing::Test {
 protected:
  // Applies r as the server does, under a sender and a new rid, and keeps it as the log does.
  void Must(Record r) {
    r.sender = "rollout/0";
    r.rid = ++rid_;
    log.push_back(r);
    store.Apply(r);
  }
  void Declare(const std::string& task, std::vector<std::string> cols) { Must(store.PlanDeclare(task, cols)->value()); }
  std::vector<uint64_t> Put(std::vector<PutRow> rows, const std::string& ack = "", uint64_t lease = 0) {
    auto rec = store.PlanPut(std::move(rows), ack, lease);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    if (!rec.ok()) return {};
    Must(*rec);
    return rec->indices;
  }
  Record Get(const GetRequest& req, int64_t now = 1000) {
    auto rec = store.PlanGet(req, now);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    // Logged as the server logs a get: when it did something.
    if (rec.ok() && (!rec->indices.empty() || !rec->dropped.empty() || !rec->regenerated.empty())) Must(*rec);
    return rec.ok() ? *rec : Record();
  }
  Result<Record> Update(std::vector<PutRow> rows, uint64_t lease, int64_t renew_ms, int64_t now,
                        const std::string& task = "generate") {
    auto rec = store.PlanUpdate(std::move(rows), task, lease, renew_ms, now);
    if (rec.ok()) Must(*rec);
    return rec;
  }
  void Expire(int64_t now) {
    for (Record& r : store.PlanExpiries(now)) store.Apply(r), log.push_back(r);
  }
  // The named column of each row a lease record hands out, as its reply would: "-" when absent.
  std::vector<std::string> Column(const Record& lease, const std::string& name) {
    RowsView view = store.ViewRows(lease.indices, lease.task, lease.also);
    std::vector<std::string> out;
    for (const auto& row : view.rows) {
      std::string v = "-";
      for (size_t i = row.begin; i < row.end; ++i) {
        if (view.columns[i].name == name) v = std::string(view.columns[i].cell->bytes());
      }
      out.push_back(v);
    }
    return out;
  }
  TaskStats StatsOf(const std::string& task) {
    for (auto& s : store.Stats()) {
      if (s.name == task) return s;
    }
    return {};
  }

  Store store;
  std::vector<Record> log;
  uint64_t rid_ = 0;
};

TEST_F(StoreUpdateTest, AlsoColumnsComeWithTheRowsThatHaveThemAndOnlyWhenAsked) {
  Declare("generate", {"prompt"});
  auto idx = Put({NewRow({{"prompt", std::string("p0")}}), NewRow({{"prompt", std::string("p1")}})});
  Put({AddTo(idx[0], {{"progress", std::string("turn 1")}})});
  GetRequest req = GetOf("generate", 2);
  req.also = {"progress", "never_seen", "group"};
  Record got = Get(req);
  EXPECT_EQ(got.also, req.also);
  EXPECT_EQ(Column(got, "prompt"), (std::vector<std::string>{"p0", "p1"}));
  EXPECT_EQ(Column(got, "progress"), (std::vector<std::string>{"turn 1", "-"}));
  RowsView view = store.ViewRows(got.indices, "generate", got.also);
  EXPECT_EQ(view.rows[0].end - view.rows[0].begin, 2u) << "prompt, progress; nothing for names rows lack";
  got.also.clear();
  EXPECT_EQ(Column(got, "progress"), (std::vector<std::string>{"-", "-"})) << "not asked: not handed out";

  // Both reply decoders see them: the copying one and the one that reads in place.
  got.also = req.also;
  ReplyBody body = ReplyFor(got, store);
  Message m;
  m.body.assign(body.body.data(), body.body.size());
  auto reply = DecodeGetReply(m);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->rows[0].columns.size(), 2u);
  EXPECT_EQ(reply->rows[0].columns[1].first, "progress");
  EXPECT_EQ(reply->rows[1].columns.size(), 1u);
  auto view_reply = DecodeGetReplyView(m);
  ASSERT_TRUE(view_reply.ok());
  const msgpack::object* progress = MapView::Of(*view_reply->rows[0].columns, "row")->Find("progress");
  ASSERT_NE(progress, nullptr);
  EXPECT_EQ(AsString(*progress, "progress").value(), "turn 1");
}

TEST_F(StoreUpdateTest, AlsoIsCheckedWithTheGetsOtherFieldsBeforeTheTaskIsLookedUp) {
  auto refused = [](std::vector<std::string> also, std::vector<std::string> columns = {}) {
    GetRequest req = GetOf("nosuch");
    req.also = std::move(also);
    req.columns = std::move(columns);
    return CheckGet(req);
  };
  EXPECT_EQ(refused({""}).code(), Code::kInvalidArgument);
  EXPECT_EQ(refused({std::string(257, 'c')}).code(), Code::kInvalidArgument);
  for (const char* reserved : {"index", "lease"}) {
    Status s = refused({reserved});
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << reserved;
    EXPECT_NE(s.message().find(reserved), std::string::npos) << s.message();
  }
  Status twice = refused({"progress", "progress"});
  EXPECT_EQ(twice.code(), Code::kInvalidArgument);
  EXPECT_NE(twice.message().find("'progress' named twice"), std::string::npos) << twice.message();
  Status overlap = refused({"prompt"}, {"prompt"});
  EXPECT_EQ(overlap.code(), Code::kInvalidArgument);
  EXPECT_NE(overlap.message().find("'prompt'"), std::string::npos) << overlap.message();
  std::vector<std::string> many;
  for (int i = 0; i < 64; ++i) many.push_back("c" + std::to_string(i));
  EXPECT_TRUE(refused(many).ok());
  many.push_back("c64");
  EXPECT_EQ(refused(many).code(), Code::kInvalidArgument);
  GetRequest req = GetOf("nosuch");
  req.also = {"lease"};
  EXPECT_EQ(store.PlanGet(req, 0).status().code(), Code::kInvalidArgument) << "before NotFound";
}

TEST_F(StoreUpdateTest, AClaimedReservedPartHandsOutTheAlsoOfTheGetThatClaimsIt) {
  Declare("train", {"ids"});
  std::vector<PutRow> rows;
  for (int64_t len : {4, 3, 2, 1}) rows.push_back(NewRow({{"ids", Tensor::FromI64(std::vector<int64_t>(len, 1))}}));
  auto idx = Put(std::move(rows));
  for (uint64_t i : idx) Put({AddTo(i, {{"note", std::string("n") + std::to_string(i)}})});
  GetRequest req = GetOf("train", 2);
  req.balance = "ids";
  req.parts = 2;
  Record first = Get(req);
  ASSERT_EQ(first.reserved.size(), 1u);
  EXPECT_EQ(Column(first, "note"), (std::vector<std::string>{"-", "-"}));
  req.also = {"note"};
  Record second = Get(req);
  ASSERT_TRUE(second.takeover);
  EXPECT_EQ(second.also, req.also);
  const std::vector<std::string> notes = Column(second, "note");
  ASSERT_EQ(notes.size(), 2u);
  for (const auto& v : notes) EXPECT_EQ(v[0], 'n');
}

TEST_F(StoreUpdateTest, AnUpdateReplacesValuesKeepsTheRowsLeasedAndRenewsTheLease) {
  Declare("generate", {"prompt"});
  auto idx = Put({NewRow({{"prompt", std::string("p")}}), NewRow({{"prompt", std::string("q")}})});
  Record lease = Get(GetOf("generate", 2), 1000);  // ends at 2000
  ASSERT_EQ(lease.deadline_ms, 2000);
  uint64_t bytes = store.live_bytes();
  auto first = Update({AddTo(idx[0], {{"progress", std::string("t1")}})}, lease.lease, 1000, 1500);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->deadline_ms, 2500);
  EXPECT_EQ(store.NextDeadline(), 2500);
  EXPECT_TRUE(store.PlanExpiries(2000).empty()) << "the lease that would have ended at 2000 goes on";
  EXPECT_EQ(StatsOf("generate").leased, 2u);
  EXPECT_EQ(StatsOf("generate").ready, 0u);
  EXPECT_EQ(StatsOf("generate").consumed, 0u);
  uint64_t after_first = store.live_bytes();
  EXPECT_GT(after_first, bytes);

  auto second = Update({AddTo(idx[0], {{"progress", std::string("turn-two")}})}, lease.lease, 0, 2400);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(second->deadline_ms, 2500) << "not renewed: the deadline it had";
  EXPECT_EQ(store.live_bytes(), after_first + 6) << "the old value's bytes are freed";
  EXPECT_EQ(Column(lease, "prompt"), (std::vector<std::string>{"p", "q"}));

  // The rollout dies: the lease ends, and whoever leases the row next gets the last progress.
  Expire(2500);
  EXPECT_EQ(StatsOf("generate").ready, 2u);
  GetRequest again = GetOf("generate", 2);
  again.also = {"progress"};
  Record next = Get(again, 2600);
  EXPECT_EQ(Column(next, "progress"), (std::vector<std::string>{"turn-two", "-"}));
  auto late = Update({AddTo(idx[0], {{"progress", std::string("late")}})}, lease.lease, 0, 2600);
  EXPECT_EQ(late.status().code(), Code::kConflict) << "the dead rollout's lease no longer holds it";
}

TEST_F(StoreUpdateTest, AnUpdatedColumnAnotherTaskNeedsMakesTheRowReadyForIt) {
  Declare("generate", {"prompt"});
  Declare("judge", {"prompt", "draft"});
  auto idx = Put({NewRow({{"prompt", std::string("p")}})});
  Record lease = Get(GetOf("generate"));
  ASSERT_TRUE(Update({AddTo(idx[0], {{"draft", std::string("d")}})}, lease.lease, 0, 1500).ok());
  EXPECT_EQ(StatsOf("judge").ready, 1u) << "which is why progress columns should have names no task needs";
  EXPECT_EQ(StatsOf("generate").leased, 1u);
}

TEST_F(StoreUpdateTest, AnUpdateIsRefusedWholeForEachRuleItBreaks) {
  Declare("generate", {"prompt"});
  Declare("train", {"prompt", "response"});
  auto idx = Put({NewRow({{"prompt", std::string("a")}}), NewRow({{"prompt", std::string("b")}}),
                  NewRow({{"prompt", std::string("c")}}), NewRow({{"prompt", std::string("d")}})});
  Put({AddTo(idx[0], {{"note", std::string("n")}})});
  Record mine = Get(GetOf("generate", 2), 1000);  // rows 0 and 1, until 2000
  Record other = Get(GetOf("generate", 1), 1000);  // row 2
  std::string before = store.EncodeSnapshot();
  auto code = [&](std::vector<PutRow> rows, uint64_t lease, int64_t renew, int64_t now, std::string* msg = nullptr,
                  const std::string& task = "generate") {
    auto r = store.PlanUpdate(std::move(rows), task, lease, renew, now);
    if (msg) *msg = r.status().message();
    return r.status().code();
  };
  auto ok_row = [&] { return AddTo(idx[0], {{"progress", std::string("x")}}); };
  std::string msg;
  // On its own: InvalidArgument.
  EXPECT_EQ(code({ok_row(), NewRow({{"progress", std::string("x")}})}, mine.lease, 0, 1500), Code::kInvalidArgument);
  EXPECT_EQ(code({ok_row(), AddTo(idx[1], {{"group", int64_t{1}}})}, mine.lease, 0, 1500, &msg),
            Code::kInvalidArgument);
  EXPECT_NE(msg.find("'group'"), std::string::npos) << msg;
  EXPECT_EQ(code({AddTo(idx[1], {{"version", int64_t{1}}})}, mine.lease, 0, 1500), Code::kInvalidArgument);
  // Of the wrong type too: writing them is the error, before their values are looked at.
  EXPECT_EQ(code({AddTo(idx[1], {{"version", std::string("x")}})}, mine.lease, 0, 1500), Code::kInvalidArgument);
  EXPECT_EQ(code({AddTo(idx[1], {{"group", 1.5}})}, mine.lease, 0, 1500), Code::kInvalidArgument);
  EXPECT_EQ(code({ok_row()}, 0, 0, 1500), Code::kInvalidArgument) << "lease 0";
  EXPECT_EQ(code({ok_row()}, mine.lease, -1, 1500), Code::kInvalidArgument) << "renew_ms < 0";
  EXPECT_EQ(code({ok_row()}, mine.lease, kMaxRenewMs + 1, 1500), Code::kInvalidArgument);
  EXPECT_EQ(code({ok_row(), ok_row()}, mine.lease, 0, 1500), Code::kInvalidArgument) << "a row twice";
  EXPECT_EQ(code({ok_row()}, mine.lease, 0, 1500, nullptr, ""), Code::kInvalidArgument) << "no task";
  // What it names: NotFound.
  EXPECT_EQ(code({ok_row()}, mine.lease, 0, 1500, nullptr, "nosuch"), Code::kNotFound);
  EXPECT_EQ(code({ok_row(), AddTo(99, {{"progress", std::string("x")}})}, mine.lease, 0, 1500), Code::kNotFound);
  // The state: Conflict, saying why.
  EXPECT_EQ(code({ok_row(), AddTo(idx[2], {{"progress", std::string("x")}})}, mine.lease, 0, 1500, &msg),
            Code::kConflict);
  EXPECT_NE(msg.find("lease " + std::to_string(other.lease) + " holds it"), std::string::npos) << msg;
  EXPECT_EQ(code({AddTo(idx[3], {{"progress", std::string("x")}})}, mine.lease, 0, 1500, &msg), Code::kConflict);
  EXPECT_NE(msg.find("does not hold it"), std::string::npos) << msg;
  EXPECT_EQ(code({AddTo(idx[3], {{"progress", std::string("x")}})}, 999, 0, 1500, &msg), Code::kConflict);
  EXPECT_NE(msg.find("no such lease"), std::string::npos) << msg;
  EXPECT_EQ(code({ok_row()}, mine.lease, 0, 2000, &msg), Code::kConflict);
  EXPECT_NE(msg.find("the lease expired"), std::string::npos) << msg;
  EXPECT_EQ(code({ok_row(), AddTo(idx[1], {{"prompt", std::string("new")}})}, mine.lease, 0, 1500, &msg),
            Code::kConflict);
  EXPECT_NE(msg.find("'prompt' was put with the row; an update cannot replace it"), std::string::npos) << msg;
  EXPECT_EQ(store.EncodeSnapshot(), before) << "planning refused changes nothing";
  // A column added by a plain put since the row's creation may be replaced.
  EXPECT_TRUE(Update({AddTo(idx[0], {{"note", std::string("m")}})}, mine.lease, 0, 1500).ok());
  // A lease that ended, and a row the task consumed.
  Expire(2000);
  EXPECT_EQ(code({ok_row()}, mine.lease, 0, 2100, &msg), Code::kConflict);
  EXPECT_NE(msg.find("the lease has ended"), std::string::npos) << msg;
  Record again = Get(GetOf("generate"), 2100);
  auto ack = store.PlanAck("generate", again.lease, again.indices);
  Must(*ack);
  EXPECT_EQ(code({AddTo(again.indices[0], {{"progress", std::string("x")}})}, again.lease, 0, 2200, &msg),
            Code::kConflict);
  EXPECT_NE(msg.find("the task consumed it"), std::string::npos) << msg;
}

TEST_F(StoreUpdateTest, AnUnclaimedReservedPartCannotBeUpdated) {
  Declare("generate", {"prompt"});
  Put({NewRow({{"prompt", std::string("aaaa")}}), NewRow({{"prompt", std::string("b")}})});
  GetRequest req = GetOf("generate");
  req.balance = "prompt";
  req.parts = 2;
  Record first = Get(req);
  ASSERT_EQ(first.reserved.size(), 1u);
  const ReservedLease& part = first.reserved[0];
  auto r = store.PlanUpdate({AddTo(part.indices[0], {{"progress", std::string("x")}})}, "generate", part.lease, 0,
                            1500);
  EXPECT_EQ(r.status().code(), Code::kConflict);
  EXPECT_NE(r.status().message().find("reserved"), std::string::npos) << r.status().message();
}

// Replaying the log, or loading a snapshot and replaying the rest, reaches the same state: every
// record through its bytes, as recovery reads them.
TEST_F(StoreUpdateTest, UpdatesReplayFromTheLogAndFromASnapshotToTheSameState) {
  Declare("generate", {"prompt"});
  Declare("judge", {"prompt", "answer"});
  auto idx = Put({NewRow({{"prompt", std::string("p0")}}), NewRow({{"prompt", std::string("p1")}}),
                  NewRow({{"prompt", std::string("p2")}})});
  GetRequest req = GetOf("generate", 2);
  req.also = {"progress"};
  Record lease = Get(req, 1000);
  ASSERT_TRUE(Update({AddTo(idx[0], {{"progress", std::string("t1")}}), AddTo(idx[1], {{"progress", int64_t{1}}})},
                     lease.lease, 5000, 1100).ok());
  size_t cut = log.size();
  std::string snapshot = store.EncodeSnapshot();
  ASSERT_TRUE(Update({AddTo(idx[0], {{"progress", Tensor::FromI64({1, 2, 3})}})}, lease.lease, 7000, 1200).ok());
  ASSERT_TRUE(Update({AddTo(idx[1], {{"answer", std::string("42")}, {"progress", std::string("done")}})},
                     lease.lease, 0, 1300).ok());
  ASSERT_TRUE(Update({AddTo(idx[0], {{"progress", std::string("t2")}})}, lease.lease, 0, 1400).ok());
  EXPECT_EQ(StatsOf("judge").ready, 1u);
  std::string want = store.EncodeSnapshot();
  ReplyBody last_reply = ReplyFor(*store.LastOf("rollout/0"), store);

  auto replay = [&](Store& s, size_t from) {
    for (size_t i = from; i < log.size(); ++i) {
      std::string bytes = EncodeRecord(log[i]);
      auto r = DecodeRecord(bytes.data(), bytes.size());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      s.Apply(std::move(*r));
    }
  };
  Store from_log;
  replay(from_log, 0);
  EXPECT_EQ(from_log.EncodeSnapshot(), want);
  EXPECT_EQ(from_log.live_bytes(), store.live_bytes());
  EXPECT_EQ(from_log.NextDeadline(), 1200 + 7000);
  Store from_snapshot;
  ASSERT_TRUE(from_snapshot.LoadSnapshot(snapshot.data(), snapshot.size()).ok());
  replay(from_snapshot, cut);
  EXPECT_EQ(from_snapshot.EncodeSnapshot(), want);
  EXPECT_EQ(from_snapshot.live_bytes(), store.live_bytes());
  Store loaded;
  ASSERT_TRUE(loaded.LoadSnapshot(want.data(), want.size()).ok());
  EXPECT_EQ(loaded.EncodeSnapshot(), want);
  EXPECT_EQ(loaded.live_bytes(), store.live_bytes());
  // A retry of the last update gets the first reply, also from the recovered state.
  for (const Store* s : {&from_log, &from_snapshot, &loaded}) {
    ReplyBody again = ReplyFor(*s->LastOf("rollout/0"), *s);
    EXPECT_EQ(std::string(again.body.data(), again.body.size()),
              std::string(last_reply.body.data(), last_reply.body.size()));
  }
  // The get's retry hands out what it asked for: its record kept `also` through the log.
  std::string bytes = EncodeRecord(log[cut - 2]);
  auto get = DecodeRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(get.ok());
  ASSERT_EQ(get->type, RecordType::kLease);
  EXPECT_EQ(get->also, req.also);
}

TEST_F(StoreUpdateTest, RegenerationDropsTheUpdatedColumnsWithTheOthersAddedSinceCreation) {
  Declare("generate", {"prompt"});
  Declare("train", {"prompt", "response", "version"});
  auto idx = Put({NewRow({{"prompt", std::string("p")}})});
  Record lease = Get(GetOf("generate"));
  ASSERT_TRUE(Update({AddTo(idx[0], {{"progress", std::string("t1")}})}, lease.lease, 0, 1100).ok());
  Put({AddTo(idx[0], {{"response", std::string("r")}, {"version", int64_t{0}}})}, "generate", lease.lease);
  uint64_t created = 0;
  {
    Store fresh;
    fresh.Apply(fresh.PlanDeclare("generate", {"prompt"})->value());
    fresh.Apply(fresh.PlanPut({NewRow({{"prompt", std::string("p")}})}, "", 0).value());
    created = fresh.live_bytes();
  }
  GetRequest train = GetOf("train");
  train.has_min_version = true;
  train.min_version = 1;
  train.regenerate_stale = true;
  Record stale = Get(train, 1200);
  EXPECT_EQ(stale.regenerated, idx);
  EXPECT_EQ(store.live_bytes(), created);
  GetRequest again = GetOf("generate");
  again.also = {"progress"};
  EXPECT_EQ(Column(Get(again, 1300), "progress"), (std::vector<std::string>{"-"}));
}

TEST(UpdateProtocolTest, UpdateFieldsTravelAndTheirCombinationsAreChecked) {
  PutRequest req;
  req.rows.push_back({uint64_t{3}, {{"progress", std::string("x")}}});
  req.update_task = "generate";
  req.update_lease = 7;
  req.renew_ms = 60000;
  auto back = DecodePut(EncodePut(req));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->update_task, "generate");
  EXPECT_EQ(back->update_lease, 7u);
  EXPECT_EQ(back->renew_ms, 60000);
  req.ack_task = "generate";
  EXPECT_EQ(DecodePut(EncodePut(req)).status().code(), Code::kInvalidArgument) << "an update does not consume";
  req.ack_task.clear();
  req.update_task.clear();
  EXPECT_EQ(DecodePut(EncodePut(req)).status().code(), Code::kInvalidArgument) << "renew without update";
  req.renew_ms = 0;
  req.update_lease = 0;
  PutRequest plain;
  plain.rows = req.rows;
  EXPECT_EQ(EncodePut(req).body, EncodePut(plain).body) << "a plain put is the body it always was";

  GetRequest get;
  get.task = "generate";
  get.also = {"progress", "turns"};
  auto got = DecodeGet(EncodeGet(get));
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->also, get.also);
  get.also.clear();
  auto none = DecodeGet(EncodeGet(get));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->also.empty());
}

}  // namespace
}  // namespace rl::queue
