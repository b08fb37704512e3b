#include "rl/model/safetensors.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <limits>

#include "rl/model/test_util.h"

namespace rl::model {
namespace {

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 ||
          std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0);
}

NamedTensors Sample() {
  at::manual_seed(3);
  at::Tensor f32 = at::randn({3, 4});
  f32[0][0] = std::numeric_limits<float>::quiet_NaN();
  f32[0][1] = -0.0f;
  return {
      {"f32", f32},
      {"f64", at::randn({5}, at::kDouble)},
      {"bf16", at::randn({2, 3}).to(at::kBFloat16)},
      {"f16", at::randn({7}).to(at::kHalf)},
      {"i64", at::arange(-3, 3, at::kLong)},
      {"i32", at::arange(0, 6, at::kInt).view({2, 3})},
      {"u8", at::arange(0, 255, at::kByte)},
      {"bool", at::tensor({1, 0, 1}).to(at::kBool)},
      {"scalar", at::scalar_tensor(2.5)},
      {"empty", at::zeros({0, 4})},
      {"strided", at::randn({4, 6}).t()},  // not contiguous
  };
}

std::string Encode(const NamedTensors& t, const Metadata& m = {}) {
  auto bytes = EncodeSafetensors(t, m);
  EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
  return bytes.ok() ? *bytes : std::string();
}

// A file with one header text and `data_size` data bytes.
std::string WithHeader(const std::string& header, size_t data_size) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + std::string(data_size, '\0');
}

Code DecodeCode(std::string_view bytes) { return DecodeSafetensors(bytes).status().code(); }

TEST(SafetensorsTest, RoundTripIsBitExact) {
  const NamedTensors in = Sample();
  const Metadata meta = {{"rl_version", "7"}, {"note", "ünïcode \"quoted\""}};
  const std::string bytes = Encode(in, meta);
  auto out = DecodeSafetensors(bytes);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->metadata, meta);
  ASSERT_EQ(out->tensors.size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out->tensors[i].first, in[i].first);
    EXPECT_TRUE(SameBits(out->tensors[i].second, in[i].second)) << in[i].first;
  }
  EXPECT_EQ(Encode(out->tensors, out->metadata), bytes);  // and back to the same bytes
}

TEST(SafetensorsTest, HeaderIsPaddedSoDataIsAligned) {
  const std::string bytes = Encode({{"x", at::ones({3})}});
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 12);
  EXPECT_EQ(bytes[8], '{');
}

TEST(SafetensorsTest, FileRoundTrip) {
  const std::string path = ::testing::TempDir() + "/safetensors_test.safetensors";
  ASSERT_TRUE(WriteSafetensorsFile(path, Sample(), {{"k", "v"}}).ok());
  auto back = ReadSafetensorsFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tensors.size(), Sample().size());
  EXPECT_EQ(ReadSafetensorsFile(path + ".missing").status().code(), Code::kIOError);
  std::remove(path.c_str());
}

TEST(SafetensorsTest, EncoderRejectsBadNames) {
  EXPECT_EQ(EncodeSafetensors({{"a", at::ones({1})}, {"a", at::ones({1})}}, {}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(EncodeSafetensors({{"__metadata__", at::ones({1})}}, {}).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(EncodeSafetensors({{"c", at::ones({1}, at::kComplexFloat)}}, {}).status().code(),
            Code::kInvalidArgument);
}

TEST(SafetensorsTest, EveryTruncationIsCorruption) {
  const std::string bytes = Encode({{"a", at::ones({2, 2})}, {"b", at::arange(3, at::kLong)}});
  for (size_t len = 0; len < bytes.size(); ++len) {
    EXPECT_EQ(DecodeCode(std::string_view(bytes).substr(0, len)), Code::kCorruption) << len;
  }
}

TEST(SafetensorsTest, FlippedBytesNeverCrash) {
  const std::string bytes =
      Encode({{"a", at::ones({2, 2})}, {"b", at::arange(3, at::kLong)}}, {{"k", "v"}});
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned char bit : {0x01, 0x10, 0x80}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ bit);
      const auto r = DecodeSafetensors(bad);
      EXPECT_TRUE(r.ok() || r.status().code() == Code::kCorruption) << r.status().ToString();
    }
  }
}

TEST(SafetensorsTest, MalformedHeadersAreCorruption) {
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  EXPECT_EQ(DecodeCode(WithHeader("{" + ok_entry + "}", 8)), Code::kOk);
  const std::pair<std::string, size_t> bad[] = {
      {"not json at all", 0},
      {"{\"a\":", 0},
      {"[1,2]", 0},
      {"{" + ok_entry + "}", 4},                                           // data short
      {"{" + ok_entry + "}", 12},                                          // trailing bytes
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,800]}})", 8},  // out of range
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8},    // reversed
      {R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8},    // shape * size
      {R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", 8},     // dtype unknown
      {R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8},   // negative dim
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", 8},      // one offset
      {R"({"a":{"dtype":"F32","shape":[2]}})", 8},                         // no offsets
      {R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       12},  // overlap
      {R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       12},                                                               // gap
      {R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", 0},  // data short
      {R"({"__metadata__":{"k":1}})", 0},                                 // not a string
      {R"({"__metadata__":"k"})", 0},
      {R"({"a":[[[[]]]]})", 0},  // too deep
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[" + std::string(200, '1').replace(1, 1, ",") + "]}}",
       0},
  };
  for (const auto& [header, data] : bad) {
    EXPECT_EQ(DecodeCode(WithHeader(header, data)), Code::kCorruption) << header;
  }
  std::string bool_two =
      WithHeader(R"({"a":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", 1);
  bool_two.back() = 2;
  EXPECT_EQ(DecodeCode(bool_two), Code::kCorruption);
}

TEST(SafetensorsTest, HugeHeaderLengthIsCorruption) {
  for (uint64_t n : {uint64_t{1} << 63, ~uint64_t{0}, kMaxHeaderBytes + 1, uint64_t{1000}}) {
    std::string bytes(8, '\0');
    std::memcpy(bytes.data(), &n, 8);
    bytes += "{}";
    EXPECT_EQ(DecodeCode(bytes), Code::kCorruption) << n;
  }
}

TEST(SafetensorsTest, LongArraysAndDeepNestingAreRejectedBeforeParsing) {
  std::string shape = "[1";
  for (int i = 0; i < 100; ++i) shape += ",1";
  shape += "]";
  const auto r = DecodeSafetensors(
      WithHeader(R"({"a":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":[0,4]}})", 4));
  EXPECT_EQ(r.status().code(), Code::kCorruption);
  EXPECT_NE(r.status().message().find("array longer"), std::string::npos) << r.status().ToString();
  const auto deep = DecodeSafetensors(WithHeader(R"({"a":{"b":[[1]]}})", 0));
  EXPECT_NE(deep.status().message().find("too deep"), std::string::npos)
      << deep.status().ToString();
}

TEST(SafetensorsTest, EmptyFileHasNoTensors) {
  auto r = DecodeSafetensors(WithHeader("{}      ", 0));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->tensors.empty());
}

}  // namespace
}  // namespace rl::model
