#include "rl/profile/workload.h"

#include <gtest/gtest.h>

#include <deque>
#include <mutex>

#include "rl/profile/queue_driver.h"
#include "rl/profile/queue_target.h"
#include "rl/profile/zmq_floor.h"
#include "rl/queue/client.h"

namespace rl::profile {
namespace {

// An in-memory queue shared by fake drivers; `redeliver_first` hands the first row out twice.
struct FakeQueue {
  std::mutex mu;
  std::deque<std::pair<std::string, int64_t>> ready;
  uint64_t next_id = 0;
  bool redeliver_first = false;
};

class FakeDriver : public QueueDriver {
 public:
  explicit FakeDriver(FakeQueue* q) : q_(q) {}
  Status Prepare() override { return Status::OK(); }
  Status Put(const std::vector<std::string>& payloads) override {
    std::lock_guard<std::mutex> lock(q_->mu);
    for (const auto& p : payloads) q_->ready.emplace_back(std::to_string(q_->next_id++), PayloadStamp(p.data(), p.size()));
    return Status::OK();
  }
  Status Get(size_t max, int wait_ms, Taken* out) override {
    out->Clear();
    std::lock_guard<std::mutex> lock(q_->mu);
    while (out->rows() < max && !q_->ready.empty()) {
      auto [id, stamp] = q_->ready.front();
      q_->ready.pop_front();
      if (q_->redeliver_first) {
        q_->redeliver_first = false;
        q_->ready.emplace_back(id, stamp);
      }
      out->ids.push_back(id);
      out->stamps_ns.push_back(stamp);
    }
    return Status::OK();
  }
  Status Ack(const Taken& taken) override { return Status::OK(); }

 private:
  FakeQueue* q_;
};

Workload Tiny() {
  Workload w;
  w.producers = 2;
  w.consumers = 2;
  w.rows = 100;
  w.row_bytes = 64;
  w.batch = 16;
  w.phase_limit_s = 20;
  w.pipeline_wait_ms = 5;
  return w;
}

void ExpectEveryOpMeasured(const WorkloadRun& run, uint64_t rows) {
  for (const OpFigure* f : {&run.put, &run.get, &run.ack, &run.e2e}) {
    EXPECT_EQ(f->rows, rows);
    EXPECT_GT(f->RowsPerSecond(), 0);
    EXPECT_FALSE(f->latency_us.empty());
  }
  EXPECT_EQ(run.e2e.latency_us.size(), rows);  // one sample per row, put to ack
}

TEST(WorkloadTest, FakeQueueRunConsumesEveryRowOnce) {
  FakeQueue q;
  auto run = RunWorkload([&](int) { return Result<std::unique_ptr<QueueDriver>>(std::make_unique<FakeDriver>(&q)); },
                         Tiny(), nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectEveryOpMeasured(*run, 200);
  EXPECT_EQ(run->put.latency_us.size(), 2u * 7);  // 100 rows in batches of 16: 7 puts per producer
  EXPECT_TRUE(run->ExactlyOnce());
  EXPECT_EQ(run->expected, 400u);
  EXPECT_EQ(run->consumed, 400u);
}

TEST(WorkloadTest, ARowDeliveredTwiceIsCounted) {
  FakeQueue q;
  q.redeliver_first = true;
  auto run = RunWorkload([&](int) { return Result<std::unique_ptr<QueueDriver>>(std::make_unique<FakeDriver>(&q)); },
                         Tiny(), nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->duplicates, 1u);
  EXPECT_FALSE(run->ExactlyOnce());
}

TEST(WorkloadTest, RefusesAnEmptyWorkload) {
  Workload w = Tiny();
  w.consumers = 0;
  FakeQueue q;
  auto run = RunWorkload([&](int) { return Result<std::unique_ptr<QueueDriver>>(std::make_unique<FakeDriver>(&q)); },
                         w, nullptr);
  EXPECT_EQ(run.status().code(), Code::kInvalidArgument);
}

TEST(WorkloadTest, InProcessRlQueueRunConsumesEveryRowOnce) {
  auto target = QueueTarget::StartThread("never");
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  std::vector<std::string> phases;
  auto run = RunWorkload(RlQueueDrivers((*target)->endpoint(), 10), Tiny(),
                         [&](const std::string& phase) { phases.push_back(phase); });
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ExpectEveryOpMeasured(*run, 200);
  EXPECT_TRUE(run->ExactlyOnce()) << run->consumed << " of " << run->expected << ", " << run->duplicates << " dup";
  EXPECT_EQ(phases, (std::vector<std::string>{"put", "get", "ack", "pipeline"}));

  // The server agrees: every row consumed by the task, none left ready or leased.
  ClientOptions o;
  o.endpoint = (*target)->endpoint();
  o.give_up_s = 10;
  auto stat = queue::QueueClient(o).Stat();
  ASSERT_TRUE(stat.ok()) << stat.status().ToString();
  ASSERT_EQ((*stat)["tasks"].size(), 1u);
  const auto& task = (*stat)["tasks"][0];
  EXPECT_EQ(task["name"], kBenchTask);
  EXPECT_EQ(task["consumed"], 400);
  EXPECT_EQ(task["ready"], 0);
  EXPECT_EQ(task["leased"], 0);
  EXPECT_TRUE((*target)->Stop().ok());
}

// With an ack window, half of each consumer's gets are acked through a pipeline: every row is
// still consumed once, and the two ack figures share the pass's rows.
TEST(WorkloadTest, InProcessRlQueueRunWithPipelinedAcksConsumesEveryRowOnce) {
  auto target = QueueTarget::StartThread("batch");
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  Workload w = Tiny();
  w.ack_window = 4;
  auto run = RunWorkload(RlQueueDrivers((*target)->endpoint(), 10), w, nullptr);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->ExactlyOnce()) << run->consumed << " of " << run->expected << ", " << run->duplicates << " dup";
  EXPECT_EQ(run->ack.rows + run->ack_pipelined.rows, 200u);
  EXPECT_GE(run->ack_pipelined.rows, 64u);  // 13 gets in all, at least 6 of them in the second halves
  EXPECT_EQ(run->ack.latency_us.size() + run->ack_pipelined.latency_us.size(), run->get.latency_us.size());
  EXPECT_TRUE((*target)->Stop().ok());
}

TEST(ZmqFloorTest, EveryRoundTripIsCountedAndTimed) {
  FloorShape s;
  s.clients = 2;
  s.round_trips = 5;
  s.request_bytes = 1000;
  s.reply_bytes = 10;
  s.rows_per_trip = 4;
  s.limit_s = 20;
  auto fig = MeasureZmqFloor(s);
  ASSERT_TRUE(fig.ok()) << fig.status().ToString();
  EXPECT_EQ(fig->rows, 2u * 5 * 4);
  EXPECT_EQ(fig->latency_us.size(), 10u);
  EXPECT_GT(fig->RowsPerSecond(), 0);
}

}  // namespace
}  // namespace rl::profile
