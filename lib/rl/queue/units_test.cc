// Storage units and their controller, each a real server on 127.0.0.1 in a thread of the test.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "rl/core/clock.h"
#include "rl/queue/client.h"
#include "rl/queue/server.h"
#include "rl/queue/unit_client.h"
#include "rl/queue/unit_ref.h"

namespace rl::queue {
namespace {

class Running {
 public:
  explicit Running(ServerOptions o) {
    int64_t give_up = MonoMillis() + 3000;  // a port just closed is released a moment later
    auto s = Server::Open(o);
    while (!s.ok() && s.status().code() == Code::kUnavailable && MonoMillis() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      s = Server::Open(o);
    }
    status_ = s.status();
    if (!s.ok()) return;
    server_ = std::move(*s);
    thread_ = std::thread([this] { EXPECT_TRUE(server_->Run(stop_).ok()); });
  }
  ~Running() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  const Status& status() const { return status_; }
  std::string endpoint() const { return server_ ? server_->endpoint() : ""; }

 private:
  Status status_;
  std::unique_ptr<Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

ClientOptions To(const std::string& endpoint) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.give_up_s = 10;
  o.attempt_timeout_ms = 2000;
  return o;
}

class UnitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rlu-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
    for (int u = 0; u < 2; ++u) {
      ServerOptions o;
      o.bind = "tcp://127.0.0.1:0";
      o.dir = dir_ + "/unit" + std::to_string(u);
      o.unit = true;
      units_.push_back(std::make_unique<Running>(o));
      ASSERT_TRUE(units_.back()->status().ok()) << units_.back()->status().ToString();
    }
    StartController();
  }
  void TearDown() override {
    controller_.reset();
    units_.clear();
    std::filesystem::remove_all(dir_);
  }
  void StartController(int64_t grace_ms = 60000, uint64_t min_bytes = 1024) {
    controller_.reset();
    ServerOptions o;
    o.bind = controller_endpoint_.empty() ? "tcp://127.0.0.1:0" : controller_endpoint_;
    o.dir = dir_ + "/controller";
    o.declare = {{"gen", {"prompt"}}, {"train", {"prompt", "response"}}};
    for (const auto& u : units_) o.units.push_back(u->endpoint());
    o.unit_grace_ms = grace_ms;
    o.unit_min_bytes = min_bytes;
    controller_ = std::make_unique<Running>(o);
    ASSERT_TRUE(controller_->status().ok()) << controller_->status().ToString();
    controller_endpoint_ = controller_->endpoint();
  }
  QueueClient Client() { return QueueClient(To(controller_endpoint_)); }
  static PutRequest OnePrompt() {
    PutRequest p;
    p.rows.push_back({std::nullopt, {{"prompt", Tensor::FromI64(std::vector<int64_t>(300, 1))}}});
    return p;
  }
  // Puts the one row of `p` to the server at `endpoint` (the controller when empty), its prompt
  // replaced by `ref`: what a client sends once it has staged the value.
  Status PutRef(const PutRequest& p, const UnitRef& ref, const std::string& endpoint = "") {
    std::vector<std::vector<std::optional<UnitRef>>> refs{{ref}};
    Message m = EncodePutRefs(p, refs);
    rl::Client c(To(endpoint.empty() ? controller_endpoint_ : endpoint));
    return c.Call(Op::kPut, std::move(m.body), std::move(m.blobs)).status();
  }
  UnitClient Unit(int u) { return UnitClient(To(units_[u]->endpoint())); }
  uint64_t UnitRows(int u) {
    QueueClient c(To(units_[u]->endpoint()));
    auto s = c.Stat();
    return s.ok() ? (*s)["rows"].get<uint64_t>() : 999999;
  }
  // Waits up to 5 s for both units to hold `rows` rows in all.
  bool UnitsReach(uint64_t rows) {
    for (int64_t end = MonoMillis() + 5000; MonoMillis() < end;) {
      if (UnitRows(0) + UnitRows(1) == rows) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  std::string dir_, controller_endpoint_;
  std::vector<std::unique_ptr<Running>> units_;
  std::unique_ptr<Running> controller_;
};

Tensor Prompt(int64_t n) { return Tensor::FromI64(std::vector<int64_t>(300, n)); }  // 2400 bytes

PutRequest Prompts(int n) {
  PutRequest p;
  for (int i = 0; i < n; ++i) {
    p.rows.push_back({std::nullopt, {{"prompt", Prompt(i)}, {"version", Value(int64_t{0})}}});
  }
  return p;
}

TEST_F(UnitsTest, AUnitStagesReadsListsAndFreesRows) {
  UnitClient unit = Unit(0);
  PutRequest p;
  p.rows.push_back({std::nullopt, {{"a", Prompt(1)}}});
  p.rows.push_back({std::nullopt, {{"a", Prompt(2)}, {"b", Value(std::string("x"))}}});
  int64_t before = WallMillis();
  auto staged = unit.Stage(p);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  EXPECT_EQ(staged->done, (std::vector<uint64_t>{0, 1}));
  EXPECT_GE(staged->staged_ms, before);
  auto read = unit.Read({{1, 0, 9}, {"a", "b"}});
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(read->rows.size(), 2u);  // row 9 is not there
  EXPECT_EQ(read->rows[0].index, 1u);
  EXPECT_EQ(*FindColumn(read->rows[0].columns, "a"), Value(Prompt(2)));
  EXPECT_EQ(*FindColumn(read->rows[0].columns, "b"), Value(std::string("x")));
  EXPECT_EQ(read->rows[1].columns.size(), 1u);
  auto young = unit.List({60000, 100});
  ASSERT_TRUE(young.ok());
  EXPECT_TRUE(young->indices.empty());
  auto all = unit.List({0, 100});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->indices, (std::vector<uint64_t>{0, 1}));
  auto freed = unit.Free({0, 5});
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(freed->done, std::vector<uint64_t>{0});
  EXPECT_EQ(freed->rejected, std::vector<uint64_t>{5});
  EXPECT_EQ(UnitRows(0), 1u);
}

TEST_F(UnitsTest, AUnitRefusesTheOpsOfAQueueAndAQueueTheOpsOfAUnit) {
  QueueClient unit(To(units_[0]->endpoint()));
  GetRequest get;
  get.task = "gen";
  get.columns = {"prompt"};
  EXPECT_EQ(unit.Get(get).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(unit.Declare("t", {"a"}).code(), Code::kInvalidArgument);
  PutRequest upd = Prompts(1);
  upd.rows[0].index = 0;
  EXPECT_EQ(unit.Put(upd).status().code(), Code::kInvalidArgument);
  UnitClient controller(To(controller_endpoint_));
  EXPECT_EQ(controller.Free({0}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Client().MetaSet({"queue.units", "x", std::nullopt}).code(), Code::kInvalidArgument);
}

TEST_F(UnitsTest, RowsPutThroughTheControllerComeBackWithTheirValuesFromTheUnits) {
  QueueClient c = Client();
  auto units = c.Units();
  ASSERT_TRUE(units.ok());
  EXPECT_EQ(units->size(), 2u);
  auto put = c.Put(Prompts(4));
  ASSERT_TRUE(put.ok()) << put.status().ToString();
  EXPECT_EQ(UnitRows(0), 2u);  // spread evenly
  EXPECT_EQ(UnitRows(1), 2u);
  GetRequest get;
  get.task = "gen";
  get.count = 4;
  auto got = c.Get(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->rows.size(), 4u);
  for (const auto& row : got->rows) {
    EXPECT_EQ(*FindColumn(row.columns, "prompt"), Value(Prompt(static_cast<int64_t>(row.index))));
    EXPECT_EQ(*FindColumn(row.columns, "version"), Value(int64_t{0}));
  }
  // The response, put with the ack of gen, goes to the unit of the row's index.
  PutRequest resp;
  resp.ack_task = "gen";
  resp.ack_lease = got->lease;
  for (const auto& row : got->rows) resp.rows.push_back({row.index, {{"response", Prompt(100 + row.index)}}});
  ASSERT_TRUE(c.Put(resp).ok());
  EXPECT_EQ(UnitRows(0), 4u);
  get.task = "train";
  QueueClient other = Client();
  auto view = other.GetView(get);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  ASSERT_EQ(view->rows.size(), 4u);
  GetReply train = *other.Get(get);  // nothing left: 0 rows
  EXPECT_TRUE(train.rows.empty());
  for (const auto& row : view->rows) {
    MapView m = *MapView::Of(*row.columns, "row");
    std::vector<std::string> frames(view->blobs.begin(), view->blobs.end());
    auto v = UnpackValue(*m.Find("response"), &frames);
    ASSERT_TRUE(v.ok()) << v.status().ToString();
    EXPECT_EQ(*v, Value(Prompt(100 + static_cast<int64_t>(row.index))));
  }
  // Consumed by both tasks: the rows go, and the janitor frees their unit rows.
  ASSERT_TRUE(c.Ack("train", view->lease, {0, 1, 2, 3}).ok());
  EXPECT_TRUE(UnitsReach(0));
}

TEST_F(UnitsTest, SmallValuesStayInTheControllerUnlessItsUnitMinBytesSaysOtherwise) {
  PutRequest p;
  p.rows.push_back({std::nullopt, {{"prompt", Tensor::FromI64({1, 2})}, {"note", Value(std::string("hi"))}}});
  ASSERT_TRUE(Client().Put(p).ok());
  EXPECT_EQ(UnitRows(0) + UnitRows(1), 0u);
  StartController(60000, 1);
  QueueClient c = Client();
  ASSERT_TRUE(c.Put(p).ok());
  EXPECT_EQ(UnitRows(0) + UnitRows(1), 1u);
  GetRequest get;
  get.task = "gen";
  get.count = 2;
  get.also = {"note"};
  auto got = c.Get(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->rows.size(), 2u);
  for (const auto& row : got->rows) {
    EXPECT_EQ(*FindColumn(row.columns, "prompt"), Value(Tensor::FromI64({1, 2})));
    EXPECT_EQ(*FindColumn(row.columns, "note"), Value(std::string("hi")));
  }
  EXPECT_EQ(c.MetaSet({"queue.unit_min_bytes", "5", std::nullopt}).code(), Code::kInvalidArgument);
}

TEST_F(UnitsTest, AnUpdateFreesTheValueItReplacesAndRegenerationTheValuesItDrops) {
  QueueClient c = Client();
  PutRequest p = Prompts(1);
  p.rows[0].columns.emplace_back("group", Value(int64_t{1}));
  ASSERT_TRUE(c.Put(p).ok());
  GetRequest get;
  get.task = "gen";
  auto got = c.Get(get);
  ASSERT_TRUE(got.ok() && got->rows.size() == 1);
  PutRequest upd;
  upd.update_task = "gen";
  upd.update_lease = got->lease;
  upd.rows.push_back({uint64_t{0}, {{"progress", Prompt(1)}}});
  ASSERT_TRUE(c.Update(upd).ok());
  EXPECT_TRUE(UnitsReach(2));
  upd.rows[0].columns[0].second = Prompt(2);
  ASSERT_TRUE(c.Update(upd).ok());
  EXPECT_TRUE(UnitsReach(2));  // the first progress is freed
  get.also = {"progress"};
  ASSERT_TRUE(c.Nack("gen", got->lease, {0}).ok());
  auto again = c.Get(get);
  ASSERT_TRUE(again.ok() && again->rows.size() == 1);
  EXPECT_EQ(*FindColumn(again->rows[0].columns, "progress"), Value(Prompt(2)));
  PutRequest resp;
  resp.ack_task = "gen";
  resp.ack_lease = again->lease;
  resp.rows.push_back({uint64_t{0}, {{"response", Prompt(3)}}});
  ASSERT_TRUE(c.Put(resp).ok());
  EXPECT_TRUE(UnitsReach(3));
  // A trainer at version 5 sends the row back: it loses response and progress.
  GetRequest train;
  train.task = "train";
  train.has_min_version = true;
  train.min_version = 5;
  train.regenerate_stale = true;
  auto stale = c.Get(train);
  ASSERT_TRUE(stale.ok());
  EXPECT_EQ(stale->regenerated, 1u);
  EXPECT_TRUE(UnitsReach(1));
}

TEST_F(UnitsTest, ABalancedGetCountsTheTokensOfReferencedValues) {
  QueueClient c = Client();
  PutRequest p;
  for (int64_t n : {1000, 1000, 200, 200, 200, 200, 200, 200}) {
    p.rows.push_back({std::nullopt, {{"prompt", Tensor::FromI64(std::vector<int64_t>(n, 1))}}});
  }
  ASSERT_TRUE(c.Put(p).ok());
  GetRequest get;
  get.task = "gen";
  get.count = 4;
  get.parts = 2;
  get.balance = "prompt";
  auto part = c.Get(get);
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  int64_t tokens = 0;
  for (const auto& row : part->rows) tokens += std::get<Tensor>(*FindColumn(row.columns, "prompt")).NumElements();
  EXPECT_EQ(tokens, 1600);  // 3200 tokens in all, split evenly: one long prompt and three short
}

TEST_F(UnitsTest, TheControllerRefusesStaleStagingAndUnitsItDoesNotHave) {
  PutRequest p = OnePrompt();
  auto staged = Unit(0).Stage(p);
  ASSERT_TRUE(staged.ok());
  Status stale = PutRef(p, {0, staged->done[0], staged->staged_ms - 31000, 2400});
  EXPECT_EQ(stale.code(), Code::kTimeout);
  EXPECT_EQ(stale.message().rfind(kStaleStaging, 0), 0u) << stale.message();
  EXPECT_EQ(PutRef(p, {2, staged->done[0], staged->staged_ms, 2400}).code(), Code::kInvalidArgument);
  EXPECT_TRUE(PutRef(p, {0, staged->done[0], staged->staged_ms, 2400}).ok());
  // A queue without units takes no references at all.
  ServerOptions o;
  o.bind = "tcp://127.0.0.1:0";
  o.dir = dir_ + "/plain";
  Running plain(o);
  ASSERT_TRUE(plain.status().ok());
  EXPECT_EQ(PutRef(p, {0, 0, WallMillis(), 2400}, plain.endpoint()).code(), Code::kInvalidArgument);
}

TEST_F(UnitsTest, AGetRefusesAUnitRowStagedAtAnotherTimeThanItsReferenceSays) {
  PutRequest p = OnePrompt();
  auto staged = Unit(0).Stage(p);
  ASSERT_TRUE(staged.ok());
  // As if the unit had lost that row (--fsync never) and staged another under its number.
  ASSERT_TRUE(PutRef(p, {0, staged->done[0], staged->staged_ms - 1, 2400}).ok());
  GetRequest get;
  get.task = "gen";
  QueueClient c = Client();
  auto got = c.Get(get);
  EXPECT_EQ(got.status().code(), Code::kCorruption) << got.status().ToString();
}

// A get reply may refer to a value its unit frees before the client reads it (the lease ran out
// and the row was regenerated meanwhile). Here the controller keeps referring to a freed value,
// so every repeat fails the same way: the client gives the rows back each time and, after its
// last try, says which value is gone; no row is left leased. (The race itself, a lease running
// out between the reply and the read, has no hook to time it from a test.)
TEST_F(UnitsTest, AGetReferringToAFreedValueGivesItsRowsBackAndTriesAgain) {
  PutRequest p = OnePrompt();
  auto staged = Unit(0).Stage(p);
  ASSERT_TRUE(staged.ok());
  ASSERT_TRUE(PutRef(p, {0, staged->done[0], staged->staged_ms, 2400}).ok());
  QueueClient c = Client();
  ASSERT_TRUE(c.Put(Prompts(1)).ok());  // a row whose value is where it should be, beside it
  ASSERT_TRUE(Unit(0).Free({staged->done[0]}).ok());
  GetRequest get;
  get.task = "gen";
  get.count = 2;
  for (bool view : {false, true}) {
    Status s = view ? c.GetView(get).status() : c.Get(get).status();
    EXPECT_EQ(s.code(), Code::kNotFound) << s.ToString();
    EXPECT_EQ(s.message().rfind(kFreedValue, 0), 0u) << s.message();
    auto stat = c.Stat();
    ASSERT_TRUE(stat.ok());
    const nlohmann::json& gen = (*stat)["tasks"][0];
    ASSERT_EQ(gen["name"], "gen");
    EXPECT_EQ(gen["leased"].get<uint64_t>(), 0u) << stat->dump();
    EXPECT_EQ(gen["ready"].get<uint64_t>(), 2u) << stat->dump();
  }
}

TEST_F(UnitsTest, TheJanitorFreesOrphansOnceAGraceOldAndNeverARowReferredTo) {
  StartController(1000);
  QueueClient c = Client();
  ASSERT_TRUE(c.Put(Prompts(2)).ok());  // referred to
  UnitClient unit = Unit(1);
  ASSERT_TRUE(unit.Stage(Prompts(3)).ok());  // a client that died before its put
  EXPECT_EQ(UnitRows(0) + UnitRows(1), 5u);
  EXPECT_TRUE(UnitsReach(2));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // several passes more
  EXPECT_EQ(UnitRows(0) + UnitRows(1), 2u);
  GetRequest get;
  get.task = "gen";
  get.count = 2;
  auto got = c.Get(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->rows.size(), 2u);
}

TEST_F(UnitsTest, ARestartedControllerKeepsItsReferencesAndRefusesOtherUnits) {
  QueueClient c = Client();
  ASSERT_TRUE(c.Put(Prompts(2)).ok());
  StartController();
  GetRequest get;
  get.task = "gen";
  get.count = 2;
  QueueClient after = Client();
  auto got = after.Get(get);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->rows.size(), 2u);
  EXPECT_EQ(*FindColumn(got->rows[1].columns, "prompt"), Value(Prompt(1)));
  controller_.reset();
  ServerOptions o;
  o.bind = "tcp://127.0.0.1:0";
  o.dir = dir_ + "/controller";
  Running without(o);
  EXPECT_EQ(without.status().code(), Code::kConfig);
  o.units = {units_[1]->endpoint(), units_[0]->endpoint()};
  Running swapped(o);
  EXPECT_EQ(swapped.status().code(), Code::kConfig);
}

}  // namespace
}  // namespace rl::queue
