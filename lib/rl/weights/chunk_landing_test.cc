#include "rl/weights/chunk_landing.h"

#include <gtest/gtest.h>

#include <string>

#include "rl/core/crc32c.h"
#include "rl/weights/test_util.h"

namespace rl::weights {
namespace {

struct Fixture {
  std::string src = testing::FakeWeights(3 << 20, 21);
  std::string dst = std::string(src.size(), '\0');
  ChunkLanding landing;
  Fixture() {
    landing.dst = dst.data();
    landing.length = dst.size();
    landing.Start();
  }
  ucs_status_t Put(size_t offset, size_t n) { return landing.Put(offset, src.data() + offset, n); }
};

TEST(ChunkLandingTest, PiecesInOrderGiveTheChunksCrcAndItsBytes) {
  Fixture f;
  for (size_t off = 0; off < f.src.size(); off += 1 << 20) ASSERT_EQ(f.Put(off, 1 << 20), UCS_OK);
  ASSERT_TRUE(f.landing.Crc().has_value());
  EXPECT_EQ(*f.landing.Crc(), Crc32c(f.src.data(), f.src.size()));
  EXPECT_EQ(f.dst, f.src);
}

TEST(ChunkLandingTest, APieceCorruptedOnTheWayChangesTheCrc) {
  Fixture f;
  ASSERT_EQ(f.Put(0, 1 << 20), UCS_OK);
  f.src[(1 << 20) + 5] ^= 0x08;  // what arrives for the second piece differs from the source's
  ASSERT_EQ(f.Put(1 << 20, 2 << 20), UCS_OK);
  f.src[(1 << 20) + 5] ^= 0x08;
  ASSERT_TRUE(f.landing.Crc().has_value());
  EXPECT_NE(*f.landing.Crc(), Crc32c(f.src.data(), f.src.size()));
}

TEST(ChunkLandingTest, PiecesOutOfOrderOrMissingLeaveNoCrc) {
  Fixture f;
  ASSERT_EQ(f.Put(1 << 20, 2 << 20), UCS_OK);
  ASSERT_EQ(f.Put(0, 1 << 20), UCS_OK);
  EXPECT_FALSE(f.landing.Crc().has_value());  // checked in place instead
  EXPECT_EQ(f.dst, f.src);
  Fixture g;
  ASSERT_EQ(g.Put(0, 1 << 20), UCS_OK);
  EXPECT_FALSE(g.landing.Crc().has_value());
}

TEST(ChunkLandingTest, APieceOutsideTheChunkIsRefusedAndNothingIsWritten) {
  Fixture f;
  EXPECT_EQ(f.landing.Put(f.dst.size() - 10, f.src.data(), 11), UCS_ERR_MESSAGE_TRUNCATED);
  EXPECT_EQ(f.landing.Put(f.dst.size() + 1, f.src.data(), 0), UCS_ERR_MESSAGE_TRUNCATED);
  EXPECT_EQ(f.landing.Put(SIZE_MAX, f.src.data(), 2), UCS_ERR_MESSAGE_TRUNCATED);
  EXPECT_FALSE(f.landing.Crc().has_value());
  EXPECT_EQ(f.dst, std::string(f.dst.size(), '\0'));
}

TEST(ChunkLandingTest, AChunkThatDidNotLandThroughItHasNoCrc) {
  // A receive that went contiguous (no generic datatype) never calls Start: its CRC must be
  // taken from the bytes, not read as 0 from a landing nothing went through.
  ChunkLanding landing;
  EXPECT_FALSE(landing.Crc().has_value());
}

}  // namespace
}  // namespace rl::weights
