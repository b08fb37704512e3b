#include "rl/core/crc32c.h"

#include <gtest/gtest.h>

#include <string>

namespace rl {
namespace {

TEST(Crc32cTest, MatchesPublishedCheckValues) {
  // RFC 3720 B.4 and the standard "123456789" check value.
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xff');
  EXPECT_EQ(Crc32c(ones.data(), ones.size()), 0x62A8AB43u);
}

TEST(Crc32cTest, HardwareAndTableAgreeOnEveryLengthAndAlignment) {
  std::string s;
  for (int i = 0; i < 300; ++i) s.push_back(static_cast<char>(i * 37 + 11));
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len = 0; start + len <= s.size(); len += 7) {
      EXPECT_EQ(Crc32c(s.data() + start, len, 5), Crc32cPortable(s.data() + start, len, 5)) << start << " " << len;
    }
  }
}

TEST(Crc32cTest, HardwareAndTableAgreeOnLongInputsSummedInStripes) {
  std::string s;
  uint32_t x = 12345;
  for (int i = 0; i < 40000; ++i) {
    x = x * 1103515245u + 12345u;
    s.push_back(static_cast<char>(x >> 24));
  }
  for (size_t len : {6143u, 6144u, 6145u, 12288u, 13001u, 39990u}) {
    for (size_t start : {0u, 3u, 8u}) {
      EXPECT_EQ(Crc32c(s.data() + start, len, 77), Crc32cPortable(s.data() + start, len, 77)) << start << " " << len;
    }
  }
  std::string zeros(20000, '\0');
  EXPECT_EQ(Crc32c(zeros.data(), zeros.size()), Crc32cPortable(zeros.data(), zeros.size()));
}

TEST(Crc32cTest, SeedContinuesAComputation) {
  std::string s = "hello, write-ahead log";
  uint32_t whole = Crc32c(s.data(), s.size());
  uint32_t part = Crc32c(s.data(), 5);
  EXPECT_EQ(Crc32c(s.data() + 5, s.size() - 5, part), whole);
}

}  // namespace
}  // namespace rl
