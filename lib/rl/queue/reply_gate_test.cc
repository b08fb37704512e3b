#include "rl/queue/reply_gate.h"

#include <gtest/gtest.h>

namespace rl::queue {
namespace {

TEST(ReplyGateTest, AlwaysWaitsForTheSyncAndNeverOnlyWhenTheWriterIsFarBehind) {
  ReplyGate always(FsyncPolicy::kAlways, 5), never(FsyncPolicy::kNever, 5);
  EXPECT_EQ(always.Limit(1000, 200, 0), 200u);
  EXPECT_EQ(never.Limit(1000, 0, 0), 1000u + kNeverUnwrittenBytes);
}

// A reply sent at 0 ms before its sync; the sync is slow (a busy disk). Until it has waited the
// interval, later replies go once written; after that, only what is synced goes.
TEST(ReplyGateTest, BatchHoldsRepliesForTheSyncOnceASentOneWaitedTheInterval) {
  ReplyGate gate(FsyncPolicy::kBatch, 5);
  EXPECT_EQ(gate.Limit(100, 0, 0), 100u) << "written is enough while nothing sent waits for a sync";
  gate.Sent(100, 0, 0);
  EXPECT_EQ(gate.Limit(300, 0, 4), 300u);
  gate.Sent(300, 0, 4);
  EXPECT_EQ(gate.Limit(400, 0, 5), 0u) << "the reply of 0 ms has waited 5 ms: replies wait for syncs";
  EXPECT_EQ(gate.Limit(400, 100, 6), 400u) << "the reply of 0 ms is synced, that of 4 ms has waited 2 ms";
  EXPECT_EQ(gate.Limit(400, 100, 9), 100u) << "the reply of 4 ms has waited 5 ms";
  EXPECT_EQ(gate.Limit(400, 300, 20), 400u) << "everything sent is synced: the window opens again";
}

TEST(ReplyGateTest, BatchWithAZeroIntervalWaitsForEverySync) {
  ReplyGate gate(FsyncPolicy::kBatch, 0);
  EXPECT_EQ(gate.Limit(100, 40, 0), 40u);
}

TEST(ReplyGateTest, RepliesWhoseRecordsWereSyncedAreNotCounted) {
  ReplyGate gate(FsyncPolicy::kBatch, 5);
  gate.Sent(100, 100, 0);  // synced before it went
  EXPECT_EQ(gate.Limit(200, 100, 50), 200u);
}

}  // namespace
}  // namespace rl::queue
