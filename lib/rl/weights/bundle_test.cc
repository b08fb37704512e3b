#include "rl/weights/bundle.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "rl/core/crc32c.h"
#include "rl/weights/chunk_crc.h"
#include "rl/weights/protocol.h"
#include "rl/weights/shared_bytes.h"
#include "rl/weights/test_util.h"

namespace rl::weights {
namespace {

using testing::FakeWeights;

TEST(BundleTest, TableCoversEveryByteInChunks) {
  auto b = Bundle::FromString(3, FakeWeights(10000, 1), 4096);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->table.chunks(), 3u);
  EXPECT_EQ(b->table.ChunkLength(2), 10000u - 8192u);
  EXPECT_TRUE(b->Verify().ok());
  EXPECT_TRUE(b->table.Validate().ok());
}

TEST(ChunkCrcTest, ExtendingTheCrcOfAPrefixGivesTheCrcOfTheWhole) {
  std::string bytes = FakeWeights(300000, 9);
  uint32_t whole = Crc32cPortable(bytes.data(), bytes.size());  // the table code, one byte at a time
  for (size_t cut : {0, 1, 8, 6144, 6145, 73728, 100001, 299999, 300000}) {
    EXPECT_EQ(ChunkCrc(bytes.data() + cut, bytes.size() - cut, ChunkCrc(bytes.data(), cut)), whole) << cut;
  }
  // Three pieces, as a chunk arrives.
  uint32_t crc = ChunkCrc(bytes.data(), 65536);
  crc = ChunkCrc(bytes.data() + 65536, 131072, crc);
  EXPECT_EQ(ChunkCrc(bytes.data() + 196608, bytes.size() - 196608, crc), whole);
}

TEST(SharedBytesTest, SealedCopyIsReadOnlyAndOpensOnlyAsItsVersion) {
  std::string bytes = FakeWeights(100000, 8);
  auto sealed = SharedBytes::Seal(7, bytes.data(), bytes.size());
  ASSERT_TRUE(sealed.ok()) << sealed.status().ToString();
  ASSERT_EQ((*sealed)->size(), bytes.size());
  EXPECT_EQ(std::string((*sealed)->data(), bytes.size()), bytes);
  auto opened = SharedBytes::Open(static_cast<int>(::getpid()), (*sealed)->fd(), 7, bytes.size());
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(std::string((*opened)->data(), bytes.size()), bytes);
  auto wrong = SharedBytes::Open(static_cast<int>(::getpid()), (*sealed)->fd(), 8, bytes.size());
  EXPECT_EQ(wrong.status().code(), Code::kProtocol) << wrong.status().ToString();
  auto gone = SharedBytes::Open(static_cast<int>(::getpid()), 999999, 7, bytes.size());
  EXPECT_EQ(gone.status().code(), Code::kNotFound) << gone.status().ToString();
  // The mapping outlives the source's copy.
  sealed->reset();
  EXPECT_EQ(std::string((*opened)->data(), bytes.size()), bytes);
}

TEST(BundleTest, OneChangedByteChangesItsChunkAndTheDigest) {
  std::string bytes = FakeWeights(20000, 2);
  auto a = Bundle::FromString(1, bytes, 4096);
  bytes[9000] ^= 1;
  auto b = Bundle::FromString(1, bytes, 4096);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->digest(), b->digest());
  EXPECT_NE(a->table.crcs[2], b->table.crcs[2]);
  EXPECT_EQ(a->table.crcs[1], b->table.crcs[1]);
}

TEST(BundleTest, VerifyNamesTheChunkThatNoLongerMatches) {
  auto b = Bundle::FromString(1, FakeWeights(20000, 3), 4096);
  ASSERT_TRUE(b.ok());
  b->table.crcs[3] ^= 1;
  Status s = b->Verify();
  EXPECT_EQ(s.code(), Code::kCorruption);
  EXPECT_NE(s.message().find("chunk 3"), std::string::npos) << s.message();
}

TEST(BundleTest, BytesThatAreNotSafetensorsAreRefused) {
  EXPECT_EQ(Bundle::FromString(1, std::string(5000, 'x')).status().code(), Code::kDataError);
  EXPECT_EQ(Bundle::FromString(1, "").status().code(), Code::kDataError);
  EXPECT_EQ(Bundle::FromString(1, FakeWeights(5000, 1), 100).status().code(), Code::kInvalidArgument);
}

TEST(BundleTest, CrcTableRoundTripsThroughItsWireForm) {
  auto b = Bundle::FromString(1, FakeWeights(50000, 4), 4096);
  ASSERT_TRUE(b.ok());
  auto crcs = ChunkTable::DecodeCrcs(b->table.EncodeCrcs());
  ASSERT_TRUE(crcs.ok());
  EXPECT_EQ(*crcs, b->table.crcs);
  EXPECT_FALSE(ChunkTable::DecodeCrcs("abc").ok());
}

TEST(ProtocolTest, OpenReplyRoundTripsAndATamperedTableIsRefused) {
  auto b = Bundle::FromString(7, FakeWeights(50000, 5), 4096);
  ASSERT_TRUE(b.ok());
  OpenGrant g;
  g.offer.version = 7;
  g.offer.table = b->table;
  g.offer.digest = b->digest();
  g.offer.max_pulls = 4;
  g.worker_address = "addr";
  g.rkey = "key";
  g.remote_addr = 0x1234;
  g.lease = 99;
  g.lease_ms = 1000;
  Message m = EncodeOpenReply(g);
  auto back = DecodeOpenReply(m);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->offer.digest, g.offer.digest);
  EXPECT_EQ(back->lease, 99u);
  EXPECT_EQ(back->remote_addr, 0x1234u);
  m.blobs[0][0] ^= 1;  // a CRC changed on the way
  EXPECT_EQ(DecodeOpenReply(m).status().code(), Code::kProtocol);
}

}  // namespace
}  // namespace rl::weights
