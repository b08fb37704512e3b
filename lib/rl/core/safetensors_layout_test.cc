// The layout reader over hand-made files; the model's tests (safetensors_test.cc) drive the same
// checks through DecodeSafetensors with files our writer made, and the reference's.
#include "rl/core/safetensors_layout.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace rl {
namespace {

std::string WithHeader(std::string header, size_t data_bytes, char fill = 0) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_bytes, fill);
}

TEST(SafetensorsLayoutTest, EntriesComeInDataOrderWithTheirSpansAndTheMetadata) {
  // Listed out of order, as writers other than ours may list them.
  const std::string bytes = WithHeader(
      R"({"b":{"dtype":"BF16","shape":[2,3],"data_offsets":[4,16]},)"
      R"("__metadata__":{"format":"pt"},)"
      R"("a":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
      R"("c":{"dtype":"BOOL","shape":[0],"data_offsets":[16,16]}}  )",
      16);
  auto layout = ReadSafetensorsLayout(bytes);
  ASSERT_TRUE(layout.ok()) << layout.status().ToString();
  ASSERT_EQ(layout->entries.size(), 3u);
  EXPECT_EQ(layout->entries[0].name, "a");
  EXPECT_TRUE(layout->entries[0].shape.empty());
  EXPECT_EQ(layout->entries[1].name, "b");
  EXPECT_EQ(layout->entries[1].dtype, "BF16");
  EXPECT_EQ(layout->entries[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(layout->entries[1].begin, 4u);
  EXPECT_EQ(layout->entries[1].end, 16u);
  EXPECT_EQ(layout->entries[2].name, "c");
  EXPECT_EQ(layout->metadata.at("format"), "pt");
  EXPECT_EQ(layout->data_start, bytes.size() - 16);
}

TEST(SafetensorsLayoutTest, ElementSizesFollowTheGrammar) {
  EXPECT_EQ(SafetensorsElementSize("F64"), 8u);
  EXPECT_EQ(SafetensorsElementSize("BF16"), 2u);
  EXPECT_EQ(SafetensorsElementSize("BOOL"), 1u);
  EXPECT_EQ(SafetensorsElementSize("F8_E4M3"), 0u);  // in newer files; not read here
  EXPECT_EQ(SafetensorsElementSize("f32"), 0u);
}

TEST(SafetensorsLayoutTest, EveryBreachIsCorruptionNamingIt) {
  struct Case {
    std::string bytes;
    const char* says;
  };
  const Case cases[] = {
      {"\x02\0\0\0\0\0\0", "shorter than the 8-byte"},
      {WithHeader("[]", 0), "not a JSON object"},
      {WithHeader("{", 0), "not a JSON object"},
      {WithHeader(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4), "does not hold 8 bytes"},
      {WithHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 5), "cover 4 of 5"},
      {WithHeader(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8), "leaving a gap"},
      {WithHeader(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                  R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                  3),
       "overlapping"},
      {WithHeader(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,1]}})", 1), "unknown dtype"},
      {WithHeader(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1), "bad dimension"},
      {WithHeader(R"({"a":{"dtype":"F64","shape":[4611686018427387904,4],"data_offsets":[0,8]}})", 8),
       "size overflows"},
      {WithHeader(R"({"a":{"dtype":"U8","shape":[1]}})", 1), "needs dtype, shape and data_offsets"},
      {WithHeader(R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", 1, 2), "BOOL byte"},
      {WithHeader(R"({"__metadata__":{"k":[]}})", 0), "is not a string"},
      {WithHeader(R"({"a":[[[[1]]]]})", 0), "nests too deep"},
  };
  for (const Case& c : cases) {
    auto layout = ReadSafetensorsLayout(c.bytes);
    ASSERT_FALSE(layout.ok()) << c.says;
    EXPECT_EQ(layout.status().code(), Code::kCorruption) << c.says;
    EXPECT_NE(layout.status().message().find(c.says), std::string::npos) << layout.status().message();
  }
}

TEST(SafetensorsLayoutTest, AHeaderLengthPastTheEndOrTheLimitIsRefusedBeforeReading) {
  for (uint64_t n : {uint64_t{100}, kMaxSafetensorsHeaderBytes + 1, ~uint64_t{0}}) {
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &n, 8);
    bytes += "{}";
    auto layout = ReadSafetensorsLayout(bytes);
    EXPECT_EQ(layout.status().code(), Code::kCorruption) << n;
  }
}

}  // namespace
}  // namespace rl
