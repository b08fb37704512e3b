#include "rl/queue/store.h"
#include "rl/queue/store_test_rows.h"

#include <gtest/gtest.h>

#include <limits>

namespace rl::queue {
namespace {

using testing::AddTo;
using testing::NewRow;

class StoreTest : public ::testing::Test {
 protected:
  void Declare(const std::string& task, std::vector<std::string> cols) {
    auto rec = store.PlanDeclare(task, cols);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    ASSERT_TRUE(rec->has_value());
    store.Apply(**rec);
  }
  std::vector<uint64_t> Put(std::vector<PutRow> rows, const std::string& ack = "", uint64_t lease = 0) {
    auto rec = store.PlanPut(std::move(rows), ack, lease);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    if (!rec.ok()) return {};
    store.Apply(*rec);
    return rec->indices;
  }
  Record Get(GetRequest req, int64_t now = 1000) {
    auto rec = store.PlanGet(req, now);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    store.Apply(*rec);
    return *rec;
  }
  Record Ack(const std::string& task, uint64_t lease, std::vector<uint64_t> idx) {
    auto rec = store.PlanAck(task, lease, idx);
    EXPECT_TRUE(rec.ok());
    store.Apply(*rec);
    return *rec;
  }
  TaskStats StatsOf(const std::string& task) {
    for (auto& s : store.Stats()) {
      if (s.name == task) return s;
    }
    return {};
  }
  Store store;
};

TEST_F(StoreTest, RowIsReadyForATaskOnceItHasAllItsColumns) {
  Declare("generate", {"prompt"});
  Declare("train", {"prompt", "response"});
  auto idx = Put({NewRow({{"prompt", std::string("1+1=")}})});
  ASSERT_EQ(idx.size(), 1u);
  EXPECT_EQ(StatsOf("generate").ready, 1u);
  EXPECT_EQ(StatsOf("train").ready, 0u);
  Put({AddTo(idx[0], {{"response", std::string("2")}})});
  EXPECT_EQ(StatsOf("train").ready, 1u);
}

TEST_F(StoreTest, ExpiredLeaseMakesRowReadyAgain) {
  Declare("t", {"x"});
  Put({NewRow({{"x", int64_t{1}}}), NewRow({{"x", int64_t{2}}})});
  GetRequest req;
  req.task = "t";
  req.count = 2;
  req.lease_ms = 500;
  Record lease = Get(req, 1000);
  EXPECT_EQ(lease.indices.size(), 2u);
  EXPECT_EQ(StatsOf("t").ready, 0u);
  EXPECT_TRUE(store.PlanExpiries(1499).empty());
  auto expired = store.PlanExpiries(1500);
  ASSERT_EQ(expired.size(), 1u);
  store.Apply(expired[0]);
  EXPECT_EQ(StatsOf("t").ready, 2u);
  EXPECT_EQ(StatsOf("t").leased, 0u);
}

// A lease longer than a year is refused: now + lease_ms of 2^63 - 1 wrapped to a deadline in the
// past, the lease expired in the turn that made it, and the next get handed the same rows out.
TEST_F(StoreTest, ALeaseLongerThanAYearIsRefusedNotWrapped) {
  Declare("t", {"x"});
  Put({NewRow({{"x", int64_t{1}}})});
  GetRequest req;
  req.task = "t";
  req.count = 1;
  for (int64_t ms : {int64_t{0}, int64_t{-5}, kMaxRenewMs + 1, std::numeric_limits<int64_t>::max()}) {
    req.lease_ms = ms;
    auto rec = store.PlanGet(req, 1000);
    ASSERT_FALSE(rec.ok()) << ms;
    EXPECT_EQ(rec.status().code(), Code::kInvalidArgument) << ms;
  }
  req.lease_ms = kMaxRenewMs;
  Record lease = Get(req, 1000);
  ASSERT_EQ(lease.indices.size(), 1u);
  EXPECT_EQ(lease.deadline_ms, 1000 + kMaxRenewMs);
  EXPECT_TRUE(store.PlanExpiries(1000 + kMaxRenewMs - 1).empty());
}

TEST_F(StoreTest, LeasesExpireEarliestFirstAndOnlyWhenDue) {
  Declare("a", {"x"});
  Declare("b", {"x"});
  std::vector<PutRow> rows;
  for (int64_t i = 0; i < 4; ++i) rows.push_back(NewRow({{"x", i}}));
  Put(std::move(rows));
  GetRequest req;
  req.count = 1;
  req.task = "a";
  req.lease_ms = 300;
  Record a1 = Get(req, 1000);  // due at 1300
  req.lease_ms = 100;
  Record a2 = Get(req, 1000);  // due at 1100
  req.task = "b";
  req.lease_ms = 200;
  Record b1 = Get(req, 1000);  // due at 1200
  Record b2 = Get(req, 1000);  // due at 1200, acked below
  Ack("b", b2.lease, b2.indices);
  EXPECT_EQ(store.NextDeadline(), 1100);
  EXPECT_TRUE(store.PlanExpiries(1099).empty());
  auto due = store.PlanExpiries(1250);
  ASSERT_EQ(due.size(), 2u) << "the acked lease is gone, the one due at 1300 is not due";
  EXPECT_EQ(due[0].lease, a2.lease);
  EXPECT_EQ(due[0].task, "a");
  EXPECT_EQ(due[1].lease, b1.lease);
  EXPECT_EQ(due[1].indices, b1.indices);
  for (const Record& r : due) store.Apply(r);
  EXPECT_EQ(store.NextDeadline(), 1300);
  Ack("a", a1.lease, a1.indices);
  EXPECT_EQ(store.NextDeadline(), INT64_MAX);
  EXPECT_TRUE(store.PlanExpiries(INT64_MAX - 1).empty());
}

TEST_F(StoreTest, TaskConsumesEachRowOnce) {
  Declare("t", {"x"});
  Put({NewRow({{"x", int64_t{1}}})});
  GetRequest req;
  req.task = "t";
  Record lease = Get(req);
  Record ack = Ack("t", lease.lease, lease.indices);
  EXPECT_EQ(ack.indices.size(), 1u);
  Record again = Ack("t", lease.lease, lease.indices);
  EXPECT_TRUE(again.indices.empty());
  EXPECT_EQ(again.rejected.size(), 1u);
  EXPECT_TRUE(Get(req).indices.empty());
}

TEST_F(StoreTest, AckUnderAnotherConsumersLeaseIsRejected) {
  Declare("t", {"x"});
  Put({NewRow({{"x", int64_t{1}}})});
  GetRequest req;
  req.task = "t";
  req.lease_ms = 10;
  Record first = Get(req, 0);
  store.Apply(store.PlanExpiries(100)[0]);
  Record second = Get(req, 100);
  ASSERT_EQ(second.indices, first.indices);
  Record late = Ack("t", first.lease, first.indices);
  EXPECT_EQ(late.rejected, first.indices);
  Record ok = Ack("t", second.lease, second.indices);
  EXPECT_EQ(ok.indices, second.indices);
}

TEST_F(StoreTest, ReleaseByHolderGivesBackOnlyThatHoldersLeases) {
  Declare("t", {"x"});
  Declare("u", {"x"});
  Put({NewRow({{"x", int64_t{1}}}), NewRow({{"x", int64_t{2}}}), NewRow({{"x", int64_t{3}}})});
  GetRequest req;
  req.task = "t";
  req.holder = "train/0";
  Record a = Get(req);  // two leases of train/0 and one of train/1 on t, one of train/0 on u
  Record b = Get(req);
  req.holder = "train/1";
  Record c = Get(req);
  req.task = "u";
  req.holder = "train/0";
  Get(req);
  ASSERT_EQ(StatsOf("t").leased, 3u);
  std::map<std::string, uint64_t> held = {{"train/0", 2}, {"train/1", 1}};
  EXPECT_EQ(StatsOf("t").holders, held);

  auto rel = store.PlanReleaseHolder("t", "train/0");
  ASSERT_TRUE(rel.ok()) << rel.status().ToString();
  std::vector<uint64_t> want = {a.indices[0], b.indices[0]};
  EXPECT_EQ(rel->indices, want);
  store.Apply(*rel);
  EXPECT_EQ(StatsOf("t").ready, 2u);
  EXPECT_EQ(StatsOf("t").leased, 1u);  // train/1's
  EXPECT_EQ(StatsOf("u").leased, 1u);  // another task's lease is not touched
  // The released rows go to the next get, and a late ack of the dead holder's is refused for
  // them; the other holder's ack still stands.
  req.task = "t";
  req.holder = "train/0";
  req.count = 2;
  EXPECT_EQ(Get(req).indices.size(), 2u);
  EXPECT_EQ(Ack("t", a.lease, a.indices).rejected, a.indices);
  EXPECT_EQ(Ack("t", c.lease, c.indices).indices, c.indices);

  auto none = store.PlanReleaseHolder("t", "rollout/9");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->indices.empty());
  EXPECT_EQ(store.PlanReleaseHolder("nope", "train/0").status().code(), Code::kNotFound);
  EXPECT_EQ(store.PlanReleaseHolder("t", "").status().code(), Code::kInvalidArgument);
}

TEST_F(StoreTest, LeaseHolderSurvivesSnapshotAndLog) {
  Declare("t", {"x"});
  Put({NewRow({{"x", int64_t{1}}})});
  GetRequest req;
  req.task = "t";
  req.holder = "reward/2";
  Record lease = Get(req);
  EXPECT_EQ(lease.holder, "reward/2");
  auto decoded = DecodeRecord(EncodeRecord(lease).data(), EncodeRecord(lease).size());
  ASSERT_TRUE(decoded.ok());
  EXPECT_EQ(decoded->holder, "reward/2");
  std::string snap = store.EncodeSnapshot();
  Store loaded;
  ASSERT_TRUE(loaded.LoadSnapshot(snap.data(), snap.size()).ok());
  auto rel = loaded.PlanReleaseHolder("t", "reward/2");
  ASSERT_TRUE(rel.ok());
  EXPECT_EQ(rel->indices, lease.indices);
}

TEST_F(StoreTest, RowsConsumedByEveryTaskAreFreed) {
  Declare("a", {"x"});
  Declare("b", {"x"});
  Put({NewRow({{"x", int64_t{1}}})});
  GetRequest req;
  req.task = "a";
  Ack("a", 0, Get(req).indices);
  EXPECT_EQ(store.live_rows(), 1u);
  req.task = "b";
  Ack("b", 0, Get(req).indices);
  EXPECT_EQ(store.live_rows(), 0u);
  EXPECT_EQ(store.live_bytes(), 0u);
}

TEST_F(StoreTest, WholeGroupsAreHandedOutTogether) {
  Declare("t", {"x"});
  Put({NewRow({{"x", int64_t{1}}, {"group", int64_t{7}}}), NewRow({{"x", int64_t{2}}, {"group", int64_t{7}}}),
       NewRow({{"x", int64_t{3}}, {"group", int64_t{8}}}), NewRow({{"x", int64_t{4}}, {"group", int64_t{8}}})});
  GetRequest req;
  req.task = "t";
  req.groups = true;
  req.count = 3;  // one group fits, the second would split
  Record lease = Get(req);
  EXPECT_EQ(lease.indices, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(StatsOf("t").ready_groups, 1u);
}

TEST_F(StoreTest, GroupIsReadyOnlyWhenEveryMemberIs) {
  Declare("gen", {"p"});
  Declare("train", {"p", "r"});
  auto idx = Put({NewRow({{"p", int64_t{1}}, {"group", std::string("g")}}),
                  NewRow({{"p", int64_t{1}}, {"group", std::string("g")}})});
  Put({AddTo(idx[0], {{"r", 1.0}})});
  EXPECT_EQ(StatsOf("train").ready, 1u);
  EXPECT_EQ(StatsOf("train").ready_groups, 0u);
  Put({AddTo(idx[1], {{"r", 0.0}})});
  EXPECT_EQ(StatsOf("train").ready_groups, 1u);
}

TEST_F(StoreTest, UniformGroupsAreDroppedForDynamicSampling) {
  Declare("train", {"reward"});
  Put({NewRow({{"reward", 1.0}, {"group", int64_t{1}}}), NewRow({{"reward", 1.0}, {"group", int64_t{1}}}),
       NewRow({{"reward", 0.0}, {"group", int64_t{2}}}), NewRow({{"reward", 1.0}, {"group", int64_t{2}}})});
  GetRequest req;
  req.task = "train";
  req.groups = true;
  req.count = 4;
  req.drop_uniform = "reward";
  Record lease = Get(req);
  EXPECT_EQ(lease.indices, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(lease.dropped, (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(StatsOf("train").dropped, 2u);
  EXPECT_EQ(lease.uniform, 2u);
  EXPECT_EQ(lease.uniform_sum, 2.0);
}

// The get says how many dropped rows were in uniform groups and what their column summed to
// (a trainer's population mean reward), apart from stale rows dropped, whose values are not
// counted; integer values count as numbers, other types add nothing.
TEST_F(StoreTest, UniformDropsCarryTheirCountAndSum) {
  Declare("train", {"reward"});
  Put({NewRow({{"reward", 0.5}, {"group", int64_t{1}}}), NewRow({{"reward", 0.5}, {"group", int64_t{1}}}),
       NewRow({{"reward", int64_t{-2}}, {"group", int64_t{2}}}),
       NewRow({{"reward", int64_t{-2}}, {"group", int64_t{2}}}),
       NewRow({{"reward", std::string("a")}, {"group", int64_t{3}}}),
       NewRow({{"reward", 9.0}, {"group", int64_t{4}}, {"version", int64_t{0}}}),
       NewRow({{"reward", 9.0}, {"group", int64_t{4}}, {"version", int64_t{0}}}),
       NewRow({{"reward", 1.0}, {"group", int64_t{5}}}), NewRow({{"reward", 0.0}, {"group", int64_t{5}}})});
  GetRequest req;
  req.task = "train";
  req.groups = true;
  req.count = 2;
  req.drop_uniform = "reward";
  req.has_min_version = true;
  req.min_version = 1;
  Record lease = Get(req);
  EXPECT_EQ(lease.indices, (std::vector<uint64_t>{7, 8}));
  EXPECT_EQ(lease.dropped.size(), 7u);
  EXPECT_EQ(lease.uniform, 5u);  // groups 1, 2 and 3; group 4 was stale
  EXPECT_EQ(lease.uniform_sum, 0.5 * 2 - 2 * 2);
  std::string bytes = EncodeRecord(lease);
  auto back = DecodeRecord(bytes.data(), bytes.size());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->uniform, 5u);
  EXPECT_EQ(back->uniform_sum, -3.0);
}

TEST_F(StoreTest, GroupsWithoutTheUniformColumnAreNotDropped) {
  Declare("train", {"x"});
  Put({NewRow({{"x", 1.0}, {"group", int64_t{1}}}), NewRow({{"x", 1.0}, {"group", int64_t{1}}})});
  GetRequest req;
  req.task = "train";
  req.groups = true;
  req.count = 2;
  req.drop_uniform = "reward";
  Record lease = Get(req);
  EXPECT_EQ(lease.indices.size(), 2u);
  EXPECT_TRUE(lease.dropped.empty());
}

TEST_F(StoreTest, TaskDeclaredAfterPartOfAGroupWasFreedStillSeesTheRest) {
  Declare("a", {"x"});
  Put({NewRow({{"x", int64_t{1}}, {"group", int64_t{1}}}), NewRow({{"x", int64_t{2}}, {"group", int64_t{1}}})});
  Ack("a", 0, {0});  // row 0 consumed by every task there is: freed
  EXPECT_EQ(store.live_rows(), 1u);
  Declare("b", {"x"});
  EXPECT_EQ(StatsOf("b").ready_groups, 1u);
  std::string snap = store.EncodeSnapshot();
  Store loaded;
  ASSERT_TRUE(loaded.LoadSnapshot(snap.data(), snap.size()).ok());
  EXPECT_EQ(loaded.Stats()[1].ready_groups, 1u) << "the same after a restart";
}

TEST_F(StoreTest, EmptyGetMakesNoLease) {
  Declare("t", {"x"});
  GetRequest req;
  req.task = "t";
  Record r = Get(req);
  EXPECT_EQ(r.lease, 0u);
  EXPECT_EQ(store.PlanPut({NewRow({{"lease", int64_t{1}}})}, "", 0).status().code(), Code::kInvalidArgument);
}

TEST_F(StoreTest, StaleRowsAreDroppedOrRegenerated) {
  Declare("gen", {"p"});
  Declare("train", {"p", "version"});
  auto idx = Put({NewRow({{"p", int64_t{1}}}), NewRow({{"p", int64_t{2}}})});
  GetRequest gen;
  gen.task = "gen";
  gen.count = 2;
  Record lease = Get(gen);
  Put({AddTo(idx[0], {{"version", int64_t{1}}}), AddTo(idx[1], {{"version", int64_t{3}}})}, "gen", lease.lease);
  GetRequest train;
  train.task = "train";
  train.count = 2;
  train.has_min_version = true;
  train.min_version = 2;
  train.regenerate_stale = true;
  Record got = Get(train);
  EXPECT_EQ(got.indices, (std::vector<uint64_t>{1}));
  EXPECT_EQ(got.regenerated, (std::vector<uint64_t>{0}));
  EXPECT_EQ(StatsOf("gen").ready, 1u) << "the regenerated row goes back to generation";
}

TEST_F(StoreTest, BalancedRoundSplitsTokensEvenlyAcrossParts) {
  Declare("train", {"ids"});
  std::vector<PutRow> rows;
  for (int64_t len : {10, 1, 9, 2, 8, 3, 7, 4}) rows.push_back(NewRow({{"ids", Tensor::FromI64(std::vector<int64_t>(len, 1))}}));
  Put(std::move(rows));
  GetRequest req;
  req.task = "train";
  req.count = 4;
  req.parts = 2;
  req.balance = "ids";
  Record first = Get(req);
  ASSERT_EQ(first.reserved.size(), 1u);
  Record second = Get(req);
  EXPECT_TRUE(second.takeover);
  EXPECT_EQ(second.lease, first.reserved[0].lease);
  auto tokens = [&](const std::vector<uint64_t>& idx) {
    int64_t sum = 0;
    for (uint64_t i : idx) sum += std::get<Tensor>(store.ViewRows({i}, "train").columns[0].cell->value()).NumElements();
    return sum;
  };
  EXPECT_EQ(tokens(first.indices), 22);
  EXPECT_EQ(tokens(second.indices), 22);
}

TEST_F(StoreTest, PutRejectsExistingColumnsAndUnknownRows) {
  Declare("t", {"x"});
  auto idx = Put({NewRow({{"x", int64_t{1}}})});
  auto dup = store.PlanPut({AddTo(idx[0], {{"x", int64_t{2}}})}, "", 0);
  EXPECT_EQ(dup.status().code(), Code::kConflict);
  auto missing = store.PlanPut({AddTo(99, {{"y", int64_t{2}}})}, "", 0);
  EXPECT_EQ(missing.status().code(), Code::kNotFound);
  auto badver = store.PlanPut({NewRow({{"version", std::string("x")}})}, "", 0);
  EXPECT_EQ(badver.status().code(), Code::kDataError);
}

TEST_F(StoreTest, SnapshotRoundTripKeepsEverything) {
  Declare("gen", {"p"});
  Declare("train", {"p", "r"});
  Put({NewRow({{"p", Tensor::FromI64({1, 2, 3})}, {"group", int64_t{1}}}),
       NewRow({{"p", Tensor::FromI64({4})}, {"group", int64_t{1}}})});
  GetRequest req;
  req.task = "gen";
  req.groups = true;
  req.count = 2;
  Record lease = Get(req);
  auto meta = store.PlanMetaSet("cursor", "17", std::nullopt);
  store.Apply(*meta);
  std::string snap = store.EncodeSnapshot();
  Store loaded;
  ASSERT_TRUE(loaded.LoadSnapshot(snap.data(), snap.size()).ok());
  EXPECT_EQ(loaded.EncodeSnapshot(), snap);
  EXPECT_EQ(*loaded.Meta("cursor"), "17");
  auto stats = loaded.Stats();
  EXPECT_EQ(stats[0].leased, 2u);
  EXPECT_EQ(loaded.NextDeadline(), lease.deadline_ms);
}

TEST_F(StoreTest, ASnapshotLendsTheBytesOfLentValuesAndKeepsThemAlive) {
  Declare("t", {"p"});
  auto frame = std::make_shared<std::string>(std::string(3000, 'a') + std::string(2000, 'b'));
  std::string_view a(frame->data(), 3000), b(frame->data() + 3000, 2000);
  Put({NewRow({{"p", int64_t{1}}}), NewRow({}), NewRow({{"p", int64_t{3}}})});
  PutRow lent = NewRow({});
  lent.columns.emplace_back("p", Cell::Lend(Bytes{}, a, frame));
  lent.columns.emplace_back("q", Cell::Lend(std::string(), b, frame));
  Put({std::move(lent)});
  std::string whole = store.EncodeSnapshot();
  WalPayload p = store.EncodeSnapshotPayload();
  ASSERT_EQ(p.holds.size(), 1u);
  EXPECT_EQ(p.holds[0], frame);
  std::string joined;
  for (std::string_view piece : PayloadPieces(p)) joined.append(piece);
  EXPECT_EQ(joined, whole);
  Store loaded;
  ASSERT_TRUE(loaded.LoadSnapshot(whole.data(), whole.size()).ok());
  EXPECT_EQ(loaded.EncodeSnapshot(), whole) << "owned values after a load pack the same bytes";
  EXPECT_EQ(loaded.live_bytes(), store.live_bytes());
  GetRequest req;
  req.task = "t";
  req.count = 10;
  Record got = Get(req);
  Ack("t", got.lease, got.indices);
  EXPECT_EQ(store.live_rows(), 1u) << "only the row without p is left";
  EXPECT_EQ(frame.use_count(), 2) << "the payload still holds the frame";
}

TEST_F(StoreTest, MetaCompareAndSet) {
  auto first = store.PlanMetaSet("k", "1", std::string(""));
  ASSERT_TRUE(first.ok());
  store.Apply(*first);
  EXPECT_EQ(store.PlanMetaSet("k", "2", std::string("0")).status().code(), Code::kConflict);
  EXPECT_TRUE(store.PlanMetaSet("k", "2", std::string("1")).ok());
}

}  // namespace
}  // namespace rl::queue
