// Which tasks keep rows alive: retired tasks, optional tasks, the "holds" statistic, and the
// order in which a request's errors are found (rl-protocol(7), "Error precedence").
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "rl/queue/store.h"
#include "rl/queue/store_test_rows.h"

namespace rl::queue {
namespace {

using testing::AddTo;
using testing::NewRow;

GetRequest GetOf(const std::string& task, uint32_t count = 1) {
  GetRequest req;
  req.task = task;
  req.count = count;
  return req;
}

class StoreHoldTest : public ::testing::Test {
 protected:
  void Declare(const std::string& task, std::vector<std::string> cols, bool optional = false) {
    Must(store.PlanDeclare(task, cols, optional)->value());
  }
  // Applies r to the store and keeps it, as the log does.
  void Must(const Record& r) {
    log.push_back(r);
    store.Apply(r);
  }
  std::vector<uint64_t> Put(std::vector<PutRow> rows) {
    auto rec = store.PlanPut(std::move(rows), "", 0);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    if (!rec.ok()) return {};
    Must(*rec);
    return rec->indices;
  }
  Record Get(const GetRequest& req) {
    auto rec = store.PlanGet(req, 1000);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    Must(*rec);
    return *rec;
  }
  void Ack(const std::string& task, std::vector<uint64_t> idx) {
    auto rec = store.PlanAck(task, 0, idx);
    ASSERT_TRUE(rec.ok()) << rec.status().ToString();
    EXPECT_TRUE(rec->rejected.empty());
    Must(*rec);
  }
  uint64_t Retire(const std::string& task) {
    auto rec = store.PlanRetire(task);
    EXPECT_TRUE(rec.ok()) << rec.status().ToString();
    Must(*rec);
    return rec->freed;
  }
  static TaskStats StatsOf(const Store& s, const std::string& task) {
    for (auto& t : s.Stats()) {
      if (t.name == task) return t;
    }
    ADD_FAILURE() << "no task " << task;
    return {};
  }
  TaskStats StatsOf(const std::string& task) const { return StatsOf(store, task); }
  Store store;
  std::vector<Record> log;
};

void ExpectSameStats(const Store& want, const Store& got, const std::string& when) {
  auto a = want.Stats(), b = got.Stats();
  ASSERT_EQ(a.size(), b.size()) << when;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].name, b[i].name) << when;
    EXPECT_EQ(a[i].optional, b[i].optional) << when << " " << a[i].name;
    EXPECT_EQ(a[i].holds, b[i].holds) << when << " " << a[i].name;
    EXPECT_EQ(a[i].ready, b[i].ready) << when << " " << a[i].name;
    EXPECT_EQ(a[i].ready_groups, b[i].ready_groups) << when << " " << a[i].name;
    EXPECT_EQ(a[i].leased, b[i].leased) << when << " " << a[i].name;
  }
  EXPECT_EQ(want.live_rows(), got.live_rows()) << when;
  EXPECT_EQ(want.live_bytes(), got.live_bytes()) << when;
}

TEST_F(StoreHoldTest, ATaskNothingConsumesKeepsEveryRowUntilItIsRetired) {
  Declare("gen", {"prompt"});
  Declare("audit", {"prompt", "verdict"});  // no row ever gets a verdict
  Put({NewRow({{"prompt", std::string("a")}}), NewRow({{"prompt", std::string("b")}}), NewRow({{"prompt", std::string("c")}})});
  Ack("gen", {0, 1, 2});
  EXPECT_EQ(store.live_rows(), 3u);
  EXPECT_EQ(StatsOf("gen").holds, 0u);
  EXPECT_EQ(StatsOf("audit").holds, 3u) << "the task that keeps them";
  EXPECT_EQ(Retire("audit"), 3u);
  EXPECT_EQ(store.live_rows(), 0u);
  EXPECT_EQ(store.live_bytes(), 0u);
  EXPECT_FALSE(store.HasTask("audit"));
  EXPECT_EQ(store.PlanRetire("audit").status().code(), Code::kNotFound);
  // Rows put from now on go once gen consumed them.
  Put({NewRow({{"prompt", std::string("d")}})});
  Ack("gen", {3});
  EXPECT_EQ(store.live_rows(), 0u);
}

TEST_F(StoreHoldTest, RetiringATaskReleasesItsLeasesAndLeavesTheTasksAfterItIntact) {
  Declare("a", {"x"});
  Declare("b", {"x"});
  Declare("c", {"x"});
  Put({NewRow({{"x", int64_t{0}}}), NewRow({{"x", int64_t{1}}}), NewRow({{"x", int64_t{2}}}),
       NewRow({{"x", int64_t{3}}})});
  EXPECT_EQ(Get(GetOf("b", 2)).indices, (std::vector<uint64_t>{0, 1}));
  Ack("a", {0, 1, 2});
  Ack("c", {0});
  Record c_lease = Get(GetOf("c"));  // row 1
  ASSERT_EQ(c_lease.indices, std::vector<uint64_t>{1});
  // Row 0 waits only for b; row 1 also for c's ack (c leases it); rows 2, 3 for c.
  EXPECT_EQ(store.PlanRetire("b")->freed, 1u);
  EXPECT_EQ(Retire("b"), 1u);
  EXPECT_EQ(store.live_rows(), 3u);
  EXPECT_EQ(StatsOf("c").holds, 3u);
  EXPECT_EQ(StatsOf("c").leased, 1u);
  EXPECT_EQ(StatsOf("c").ready, 2u);
  EXPECT_EQ(StatsOf("a").holds, 1u);  // row 3
  // c's lease still expires as c's, with its rows, though c moved to b's place.
  auto expiries = store.PlanExpiries(c_lease.deadline_ms);
  ASSERT_EQ(expiries.size(), 1u);
  EXPECT_EQ(expiries[0].task, "c");
  EXPECT_EQ(expiries[0].indices, std::vector<uint64_t>{1});
  Ack("c", {1, 2});
  EXPECT_EQ(store.live_rows(), 1u) << "rows 1 and 2 were consumed by a and c, the tasks left";
  Ack("a", {3});
  Ack("c", {3});
  EXPECT_EQ(store.live_rows(), 0u);
  // The name can be declared again; the new task sees only rows put from then on.
  Declare("b", {"x"});
  EXPECT_EQ(StatsOf("b").ready, 0u);
}

TEST_F(StoreHoldTest, RetiringTheLastRequiredTaskFreesNothing) {
  Declare("gen", {"x"});
  Put({NewRow({{"x", int64_t{0}}})});
  EXPECT_EQ(Retire("gen"), 0u);
  EXPECT_EQ(store.live_rows(), 1u) << "while no task needs rows, none is deleted";
  Declare("late", {"x"});
  EXPECT_EQ(StatsOf("late").ready, 1u);
}

TEST_F(StoreHoldTest, AnOptionalTaskHoldsNoRowAliveButItsLeasesDo) {
  Declare("gen", {"prompt"});
  Declare("audit", {"prompt"}, true);
  Put({NewRow({{"prompt", std::string("a")}}), NewRow({{"prompt", std::string("b")}})});
  EXPECT_TRUE(StatsOf("audit").optional);
  EXPECT_EQ(StatsOf("audit").holds, 0u);
  EXPECT_EQ(StatsOf("gen").holds, 2u);
  Ack("gen", {0});
  EXPECT_EQ(store.live_rows(), 1u) << "row 0 goes though audit never saw it";
  EXPECT_EQ(StatsOf("audit").ready, 1u);
  Record audit = Get(GetOf("audit", 10));
  EXPECT_EQ(audit.indices, std::vector<uint64_t>{1});
  Ack("gen", {1});
  EXPECT_EQ(store.live_rows(), 1u) << "audit's lease keeps row 1";
  Ack("audit", {1});
  EXPECT_EQ(store.live_rows(), 0u);
  // Declared again with the same columns it must say optional again.
  EXPECT_FALSE(store.PlanDeclare("audit", {"prompt"}, true)->has_value());
  EXPECT_EQ(store.PlanDeclare("audit", {"prompt"}, false).status().code(), Code::kConflict);
  EXPECT_EQ(store.PlanDeclare("gen", {"prompt"}, true).status().code(), Code::kConflict);
}

TEST_F(StoreHoldTest, AnOptionalTaskStillGetsTheRestOfAGroupWhoseMembersWereFreed) {
  Declare("gen", {"x"});
  Declare("audit", {"x"}, true);
  Put({NewRow({{"x", int64_t{0}}, {"group", std::string("g")}}), NewRow({{"x", int64_t{1}}, {"group", std::string("g")}})});
  Ack("gen", {0});
  ASSERT_EQ(store.live_rows(), 1u);
  EXPECT_EQ(StatsOf("audit").ready_groups, 1u);
  GetRequest req = GetOf("audit", 2);
  req.groups = true;
  EXPECT_EQ(Get(req).indices, std::vector<uint64_t>{1});
}

TEST_F(StoreHoldTest, ARegeneratedRowIsHeldAgainByTheTasksThatHadConsumedIt) {
  Declare("gen", {"prompt"});
  Declare("train", {"prompt", "response"});
  Put({NewRow({{"prompt", std::string("p")}, {"version", int64_t{0}}})});
  Ack("gen", {0});
  ASSERT_EQ(StatsOf("gen").holds, 0u);
  Put({AddTo(0, {{"response", std::string("r")}})});
  GetRequest req = GetOf("train");
  req.has_min_version = true;
  req.min_version = 1;
  req.regenerate_stale = true;
  EXPECT_EQ(Get(req).regenerated, std::vector<uint64_t>{0});
  EXPECT_EQ(StatsOf("gen").holds, 1u) << "gen generates it again";
  EXPECT_EQ(StatsOf("train").holds, 1u);
}

TEST_F(StoreHoldTest, RetireAndOptionalSurviveTheLogAndSnapshots) {
  Declare("gen", {"x"});
  Declare("audit", {"x", "y"}, true);
  Declare("old", {"x", "z"});
  Put({NewRow({{"x", int64_t{0}}}), NewRow({{"x", int64_t{1}}})});
  Get(GetOf("old"));
  Ack("gen", {0, 1});
  Retire("old");
  Put({NewRow({{"x", int64_t{2}}})});
  // The log replayed through encoded records, and a snapshot loaded, give the same state.
  Store replayed;
  for (const Record& r : log) {
    std::string bytes = EncodeRecord(r);
    auto decoded = DecodeRecord(bytes.data(), bytes.size());
    ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
    replayed.Apply(*decoded);
  }
  ExpectSameStats(store, replayed, "replayed");
  EXPECT_FALSE(replayed.HasTask("old"));
  EXPECT_TRUE(replayed.IsOptional("audit"));
  std::string snap = store.EncodeSnapshot();
  Store loaded;
  ASSERT_TRUE(loaded.LoadSnapshot(snap.data(), snap.size()).ok());
  ExpectSameStats(store, loaded, "loaded");
  EXPECT_EQ(loaded.EncodeSnapshot(), snap);
  // The retirement is remembered for its sender's retry, with what it freed.
  Record retire = *store.PlanDeclare("x", {"x"}).value();
  retire.type = RecordType::kRetire;
  retire.freed = 7;
  std::string bytes = EncodeRecord(retire);
  EXPECT_EQ(DecodeRecord(bytes.data(), bytes.size())->freed, 7u);
}

// A snapshot as servers before retire and optional tasks wrote it (four fields per task) loads,
// and a store without optional tasks still writes that form.
TEST_F(StoreHoldTest, ASnapshotOfTheOlderFormLoads) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(8);
  PackString(pk, "next_index");
  pk.pack_uint64(2);
  PackString(pk, "next_lease");
  pk.pack_uint64(1);
  PackString(pk, "tasks");
  pk.pack_array(2);
  for (const char* name : {"gen", "train"}) {
    pk.pack_array(4);
    PackString(pk, name);
    PackStringList(pk, {"x"});
    pk.pack_uint64(name[0] == 'g' ? 1 : 0);
    pk.pack_uint64(0);
  }
  PackString(pk, "rows");  // row 1: consumed by gen (bit 0)
  pk.pack_array(1);
  pk.pack_array(4);
  pk.pack_uint64(1);
  pk.pack_uint32(1);
  pk.pack_uint64(1);
  pk.pack_map(1);
  PackString(pk, "x");
  pk.pack_int64(5);
  PackString(pk, "groups");
  pk.pack_array(0);
  PackString(pk, "leases");
  pk.pack_array(0);
  PackString(pk, "meta");
  pk.pack_map(0);
  PackString(pk, "last");
  pk.pack_array(0);
  ASSERT_TRUE(store.LoadSnapshot(buf.data(), buf.size()).ok());
  EXPECT_EQ(StatsOf("gen").holds, 0u);
  EXPECT_EQ(StatsOf("train").holds, 1u);
  EXPECT_FALSE(StatsOf("train").optional);
  EXPECT_EQ(store.EncodeSnapshot(), std::string(buf.data(), buf.size()));
  EXPECT_EQ(Retire("train"), 1u);
}

// "holds" is kept up to date change by change; a snapshot load counts it afresh. Both must agree
// after any sequence of puts, gets, acks, expiries, regenerations, declarations and retirements.
TEST_F(StoreHoldTest, HoldsKeptChangeByChangeMatchesACountFromScratch) {
  std::mt19937 rng(7);
  Declare("t0", {"x"});
  Declare("t1", {"x", "y"});
  Declare("t2", {"x"}, true);
  int64_t now = 1000;
  uint64_t regenerated = 0, retired = 0, freed = 0, gone = 0;
  for (int step = 0; step < 600; ++step) {
    gone = std::max(gone, store.next_index() - store.live_rows());
    auto tasks = store.Stats();
    const std::string task = tasks.empty() ? "" : tasks[rng() % tasks.size()].name;
    switch (rng() % 9) {
      case 0:
      case 1: {
        std::vector<PutRow> rows;
        std::string group = "g" + std::to_string(step);
        for (uint32_t i = 0, n = 1 + rng() % 3; i < n; ++i) {
          rows.push_back(NewRow({{"x", int64_t(i)}, {"version", int64_t(step % 5)}}));
          if (n > 1) rows.back().columns.emplace_back("group", Value{group});
        }
        Put(std::move(rows));
        break;
      }
      case 2:
        if (store.next_index() > 0) {
          uint64_t i = rng() % store.next_index();
          auto rec = store.PlanPut({AddTo(i, {{"y", int64_t{1}}})}, "", 0);
          if (rec.ok()) Must(*rec);
        }
        break;
      case 3:
      case 4: {
        if (task.empty()) break;
        GetRequest req = GetOf(task, 1 + rng() % 3);
        req.groups = rng() % 2;
        req.lease_ms = 1 + rng() % 50;
        req.has_min_version = rng() % 3 == 0;
        req.min_version = 2;
        req.regenerate_stale = rng() % 2;
        auto rec = store.PlanGet(req, now);
        ASSERT_TRUE(rec.ok());
        Must(*rec);
        regenerated += rec->regenerated.size();
        if (rng() % 2 && !rec->indices.empty()) Must(store.PlanAck(task, rec->lease, rec->indices).value());
        break;
      }
      case 5:
        now += 20;
        for (const Record& r : store.PlanExpiries(now)) Must(r);
        break;
      case 6:
        if (!task.empty() && rng() % 4 == 0) {
          freed += Retire(task);
          retired++;
        }
        break;
      case 8:
        if (!task.empty() && store.next_index() > 0) {  // rows nobody leased, some refused
          std::vector<uint64_t> idx;
          for (int i = 0; i < 4; ++i) idx.push_back(rng() % store.next_index());
          Must(store.PlanAck(task, 0, idx).value());
        }
        break;
      case 7: {
        std::string name = "t" + std::to_string(rng() % 4);
        auto rec = store.PlanDeclare(name, {"x"}, rng() % 2);
        if (rec.ok() && rec->has_value()) Must(**rec);
        break;
      }
    }
    std::string snap = store.EncodeSnapshot();
    Store loaded;
    ASSERT_TRUE(loaded.LoadSnapshot(snap.data(), snap.size()).ok());
    ExpectSameStats(loaded, store, "step " + std::to_string(step));
    if (HasFailure()) return;
  }
  // The walk went through what it is meant to check.
  EXPECT_GT(regenerated, 0u);
  EXPECT_GT(retired, 0u);
  EXPECT_GT(freed, 0u);
  EXPECT_GT(gone, 0u);
}

TEST(TaskColumnsTest, NamesNoRowCanHaveAndNamesGivenTwiceAreRefused) {
  Store store;
  EXPECT_EQ(store.PlanDeclare("t", {"x", "index"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store.PlanDeclare("t", {"lease"}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(store.PlanDeclare("t", {"x", "y", "x"}).status().code(), Code::kInvalidArgument);
  EXPECT_TRUE(store.PlanDeclare("t", {"x", "version", "group"}).ok()) << "real columns";
  GetRequest req = GetOf("t");
  req.columns = {"x", "x"};
  EXPECT_EQ(store.PlanGet(req, 0).status().code(), Code::kInvalidArgument);
}

TEST(ErrorPrecedenceTest, TheRequestIsCheckedBeforeWhatItNamesAndThatBeforeTheState) {
  Store store;
  GetRequest req = GetOf("nosuch", 0);
  EXPECT_EQ(store.PlanGet(req, 0).status().code(), Code::kInvalidArgument) << "count 0 of an unknown task";
  EXPECT_EQ(store.PlanAck("nosuch", 0, std::vector<uint64_t>(1000001)).status().code(), Code::kTooLarge);
  store.Apply(store.PlanDeclare("t", {"x"})->value());
  store.Apply(store.PlanPut({NewRow({{"x", int64_t{1}}, {"group", int64_t{4}}})}, "", 0).value());
  // A put: a bad value in a later row is found before an unknown row or task in an earlier one,
  // an unknown row before a row or group the state refuses.
  auto put = store.PlanPut({AddTo(99, {{"y", int64_t{1}}}), NewRow({{"version", 1.5}})}, "", 0);
  EXPECT_EQ(put.status().code(), Code::kDataError);
  EXPECT_EQ(put.status().message(), "row 1 column 'version': must be an integer, not float");
  put = store.PlanPut({NewRow({{"group", Bytes{}}})}, "", 0);
  EXPECT_EQ(put.status().message(), "row 0 column 'group': must be an integer or a string");
  put = store.PlanPut({AddTo(0, {{"x", int64_t{2}}}), AddTo(99, {{"y", int64_t{1}}})}, "", 0);
  EXPECT_EQ(put.status().code(), Code::kNotFound) << put.status().message();
  EXPECT_EQ(put.status().message(), "row 1 (index 99) does not exist (never put, or consumed by every task and freed)");
  put = store.PlanPut({AddTo(0, {{"y", int64_t{2}}}), AddTo(0, {{"z", int64_t{1}}})}, "nosuch", 0);
  EXPECT_EQ(put.status().code(), Code::kInvalidArgument) << "named twice, before the unknown ack task";
  put = store.PlanPut({NewRow({{"group", int64_t{4}}}), AddTo(99, {{"y", int64_t{1}}})}, "", 0);
  EXPECT_EQ(put.status().code(), Code::kNotFound) << "before the group that exists";
  put = store.PlanPut({AddTo(99, {{"group", int64_t{5}}})}, "", 0);
  EXPECT_EQ(put.status().code(), Code::kNotFound) << "before 'group' on an existing row";
  put = store.PlanPut({AddTo(0, {{"group", int64_t{5}}})}, "", 0);
  EXPECT_EQ(put.status().code(), Code::kConflict);
  EXPECT_EQ(store.PlanRetire("").status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rl::queue
