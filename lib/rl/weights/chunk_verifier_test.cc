#include "rl/weights/chunk_verifier.h"

#include <gtest/gtest.h>

#include <map>

#include "rl/core/clock.h"
#include "rl/weights/test_util.h"

namespace rl::weights {
namespace {

TEST(ChunkVerifierTest, ReportsEachSubmittedChunkOnceAndFindsTheCorruptOne) {
  std::string bytes = testing::FakeWeights(1 << 20, 1);
  ChunkTable table = ChunkTable::Of(bytes.data(), bytes.size(), 64 << 10);
  bytes[5 * (64 << 10) + 100] ^= 1;  // chunk 5 changes after its CRC was taken
  std::map<size_t, bool> seen;
  {
    ChunkVerifier v(&table, bytes.data());
    for (size_t i = 0; i < table.chunks(); ++i) v.Submit(i);
    int64_t deadline = MonoMillis() + 10000;
    while (v.pending() > 0 && MonoMillis() < deadline) {
      v.WaitForResult(100);
      for (const auto& r : v.Take()) EXPECT_TRUE(seen.emplace(r.chunk, r.ok).second) << r.chunk;
    }
    EXPECT_EQ(v.pending(), 0u);
  }
  ASSERT_EQ(seen.size(), table.chunks());
  for (const auto& [chunk, ok] : seen) EXPECT_EQ(ok, chunk != 5) << chunk;
}

TEST(ChunkVerifierTest, GoesAwayWithChecksNotTaken) {
  std::string bytes = testing::FakeWeights(1 << 20, 2);
  ChunkTable table = ChunkTable::Of(bytes.data(), bytes.size(), 64 << 10);
  ChunkVerifier v(&table, bytes.data());
  for (size_t i = 0; i < table.chunks(); ++i) v.Submit(i);
}

}  // namespace
}  // namespace rl::weights
