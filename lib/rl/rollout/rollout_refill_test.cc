// rl-rollout --refill (rollout_loop.h): more groups join a running batch as its sequences finish,
// each group is put whole as soon as it is done, and a newer weight version ends the batch.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>

#include "rl/rollout/rollout_loop_fixture.h"

namespace rl::rollout {
namespace {

// Every generated row's group and version, by a get of task `check`.
std::map<int64_t, std::set<int64_t>> VersionsByGroup(TestQueue& queue, uint32_t rows) {
  queue::GetRequest g;
  g.task = "check";
  g.columns = {"version", "group", "response_ids"};
  g.count = rows;
  auto got = queue.Client().Get(g);
  EXPECT_TRUE(got.ok()) << got.status().ToString();
  std::map<int64_t, std::set<int64_t>> out;
  if (!got.ok()) return out;
  EXPECT_EQ(got->rows.size(), rows);
  for (const auto& row : got->rows) {
    out[std::get<int64_t>(*FindColumn(row.columns, "group"))].insert(
        std::get<int64_t>(*FindColumn(row.columns, "version")));
  }
  return out;
}

TEST_F(RolloutLoopTest, RefillTakesGroupsIntoARunningBatchAndPutsEachWhole) {
  PutPrompts(6, 4);
  RolloutOptions o = Options();
  o.refill = true;
  o.count = 8;  // the first get: 2 groups; the others join as slots free
  RolloutStats stats = RunUntilConsumed(24, o);
  EXPECT_EQ(stats.rows, 24u);
  EXPECT_EQ(stats.groups, 6u);
  EXPECT_GE(stats.refills, 1u);
  EXPECT_LT(stats.batches, 3u);  // batch by batch it takes 3 gets of 8
  EXPECT_EQ(queue_->Task("generate")["consumed"], 24);
  EXPECT_EQ(queue_->Task("generate")["leased"], 0);
  auto versions = VersionsByGroup(*queue_, 24);
  EXPECT_EQ(versions.size(), 6u);
  for (const auto& [group, v] : versions) EXPECT_EQ(v, std::set<int64_t>{1}) << "group " << group;
  EXPECT_EQ(RewardRows(24).size(), 24u);
}

// With finish, a version that arrives mid-batch stops the refills: the batch drains, the loop
// switches at the boundary, and every group is one version's.
TEST_F(RolloutLoopTest, RefillEndsTheBatchWhenANewerVersionArrives) {
  const int groups = 150;
  PutPrompts(groups, 4);
  RolloutOptions o = Options();
  o.refill = true;
  o.generate.slots = 64;  // room for every row before the row cap ends a batch
  auto running = Start(o);
  WaitConsumed(8, 2);
  testing::WriteWeights(dir_, 2, 6);
  WaitConsumed(groups * 4u, 20);
  RolloutStats stats = Stop(running.get());
  auto versions = VersionsByGroup(*queue_, groups * 4);
  int of_2 = 0;
  for (const auto& [group, v] : versions) {
    EXPECT_EQ(v.size(), 1u) << "group " << group << " mixes versions";
    of_2 += v.count(2) ? 1 : 0;
  }
  EXPECT_GT(of_2, 0) << "the batch went on under version 1 after version 2 arrived";
  EXPECT_GE(stats.batches, 2u);
}

// A batch ends after kRefillRowsPerSlot rows per slot even while rows keep coming: 80 rows
// through 2 slots (32 a batch) take at least three.
TEST_F(RolloutLoopTest, RefillEndsABatchAfterSixteenRowsPerSlot) {
  PutPrompts(20, 4);
  RolloutOptions o = Options();
  o.refill = true;
  o.generate.slots = 2;
  o.count = 4;
  RolloutStats stats = RunUntilConsumed(80, o);
  EXPECT_EQ(stats.rows, 80u);
  EXPECT_GE(stats.batches, 3u);
  EXPECT_LE(stats.batches, 4u);
}

// Stopped mid-batch, the loop takes nothing more, finishes the groups it holds and leaves the
// rest ready: nothing leased, nothing lost.
TEST_F(RolloutLoopTest, RefillStoppedMidBatchLeavesTheRestReady) {
  const int groups = 100;
  PutPrompts(groups, 4);
  RolloutOptions o = Options();
  o.refill = true;
  auto running = Start(o);
  WaitConsumed(8, 2);
  RolloutStats stats = Stop(running.get());
  const uint64_t consumed = queue_->Task("generate")["consumed"].get<uint64_t>();
  EXPECT_EQ(queue_->Task("generate")["leased"], 0);
  EXPECT_EQ(consumed + queue_->Task("generate")["ready"].get<uint64_t>(), groups * 4u);
  EXPECT_EQ(stats.rows, consumed);
  EXPECT_EQ(consumed % 4, 0u) << "a group was put in part";
}

}  // namespace
}  // namespace rl::rollout
