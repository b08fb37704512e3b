#include <gtest/gtest.h>

#include "rl/wire/envelope.h"
#include "rl/wire/json_value.h"
#include "rl/wire/msgpack_io.h"

namespace rl {
namespace {

Value RoundTrip(const Value& v, bool frames) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  std::vector<std::string> blobs;
  PackValue(pk, v, frames ? &blobs : nullptr);
  auto oh = ParseMsgpack(buf.data(), buf.size());
  EXPECT_TRUE(oh.ok());
  auto out = UnpackValue(oh->get(), &blobs);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return *out;
}

TEST(ValueCodecTest, EveryValueTypeRoundTrips) {
  Tensor big = Tensor::FromF32(std::vector<float>(5000, 0.5f));
  big.shape = {50, 100};
  for (const Value& v : {Value{}, Value{true}, Value{int64_t{-7}}, Value{2.5}, Value{std::string("abc")},
                         Value{Bytes{std::string("\0\1\2", 3)}}, Value{Tensor::FromI64({1, 2, 3})}, Value{big}}) {
    EXPECT_EQ(RoundTrip(v, false), v);
    EXPECT_EQ(RoundTrip(v, true), v);
  }
}

TEST(ValueCodecTest, WholeNumberFloatsStayFloats) {
  for (double d : {1.0, 0.0, -3.0, 1e19, -1e19}) {
    Value v = RoundTrip(Value{d}, false);
    ASSERT_TRUE(std::holds_alternative<double>(v)) << d;
    EXPECT_EQ(std::get<double>(v), d);
  }
}

TEST(ValueCodecTest, InlineTensorHasTheDocumentedBytes) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  PackValue(pk, Tensor::FromI64({1}), nullptr);
  // ext8 (0xc7), length 18, type 1, dtype i64 (5), ndim 1, dim 1 (i64 LE), data 1 (i64 LE)
  std::string expected("\xc7\x12\x01\x05\x01" "\x01\0\0\0\0\0\0\0" "\x01\0\0\0\0\0\0\0", 21);
  EXPECT_EQ(std::string(buf.data(), buf.size()), expected);
}

TEST(ValueCodecTest, MalformedTensorsAreRejected) {
  std::vector<std::string> none;
  auto decode = [&](std::string ext_payload, int8_t type) {
    msgpack::sbuffer buf;
    Packer pk(buf);
    pk.pack_ext(ext_payload.size(), type);
    pk.pack_ext_body(ext_payload.data(), static_cast<uint32_t>(ext_payload.size()));
    auto oh = ParseMsgpack(buf.data(), buf.size());
    return UnpackValue(oh->get(), &none).status();
  };
  EXPECT_FALSE(decode("", 1).ok());
  EXPECT_FALSE(decode(std::string("\x63\x01", 2), 1).ok()) << "unknown dtype";
  EXPECT_FALSE(decode(std::string("\x05\x01\x02\0\0\0\0\0\0\0\x01", 11), 1).ok()) << "data shorter than shape";
  EXPECT_FALSE(decode(std::string("\x05\x01\x01\0\0\0\0\0\0\0\0\0\0\0", 14), 2).ok()) << "absent frame";
  EXPECT_FALSE(decode(std::string("\x05\x09", 2), 1).ok()) << "too many dims";
  EXPECT_FALSE(decode("x", 9).ok()) << "unknown ext type";
}

TEST(EnvelopeTest, RequestRoundTrips) {
  Message m;
  m.header = {static_cast<uint8_t>(Op::kPut), 42, 7, "me", 0, ""};
  m.body = EmptyBody();
  m.blobs = {"blob"};
  auto d = DecodeRequest(EncodeRequest(m));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->header.rid, 42u);
  EXPECT_EQ(d->header.seq, 7u);
  EXPECT_EQ(d->header.from, "me");
  EXPECT_EQ(d->blobs, m.blobs);
}

TEST(EnvelopeTest, MalformedFramesAreProtocolErrors) {
  EXPECT_EQ(DecodeRequest({}).status().code(), Code::kProtocol);
  EXPECT_EQ(DecodeRequest({"RLP1", "x"}).status().code(), Code::kProtocol);
  EXPECT_EQ(DecodeRequest({"RLP2", "\x80", "\x80"}).status().code(), Code::kProtocol);
  EXPECT_EQ(DecodeRequest({"RLP1", "\xc1", "\x80"}).status().code(), Code::kProtocol) << "reserved byte";
  EXPECT_EQ(DecodeRequest({"RLP1", "\x80", "\x80"}).status().code(), Code::kProtocol) << "no op";
  EXPECT_EQ(DecodeRequest({"RLP1", std::string("\x81\xa2op\x01\x00", 6), "\x80"}).status().code(), Code::kProtocol)
      << "trailing byte";
  // A deeply nested header is refused by the depth limit, not the stack.
  EXPECT_EQ(DecodeRequest({"RLP1", std::string(100000, '\x91'), "\x80"}).status().code(), Code::kProtocol);
  // A length that promises more than the frame holds.
  EXPECT_EQ(DecodeRequest({"RLP1", std::string("\xdf\xff\xff\xff\xff", 5), "\x80"}).status().code(), Code::kProtocol);
}

TEST(JsonValueTest, ValuesRoundTripThroughJson) {
  Tensor f32 = Tensor::FromF32({0.25f, -1.5f});
  Tensor m{DType::kI32, {2, 2}, std::string(16, '\0')};
  for (const Value& v : {Value{}, Value{false}, Value{int64_t{3}}, Value{0.5}, Value{std::string("s")},
                         Value{Bytes{"\xff"}}, Value{Tensor::FromI64({4, 5})}, Value{f32}, Value{m}}) {
    auto back = ValueFromJson(ValueToJson(v));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, v) << ValueToJson(v).dump();
  }
}

TEST(JsonValueTest, BadJsonValuesAreDataErrors) {
  EXPECT_EQ(ValueFromJson(nlohmann::json::parse(R"([1, "a"])")).status().code(), Code::kDataError);
  EXPECT_EQ(ValueFromJson(nlohmann::json::parse(R"({"dtype":"f99","shape":[1],"data":[1]})")).status().code(),
            Code::kDataError);
  EXPECT_EQ(ValueFromJson(nlohmann::json::parse(R"({"dtype":"f32","shape":[3],"data":[1]})")).status().code(),
            Code::kDataError);
  EXPECT_EQ(ValueFromJson(nlohmann::json::parse(R"({"hex":"abc"})")).status().code(), Code::kDataError);
  auto flags = ValueFromJson(nlohmann::json::parse(R"({"dtype":"bool","shape":[2],"data":[true,false]})"));
  ASSERT_TRUE(flags.ok());
  EXPECT_EQ(std::get<Tensor>(*flags).data, std::string("\1\0", 2));
  EXPECT_EQ(ValueFromJson(nlohmann::json::parse(R"({"dtype":"u8","shape":[1],"data":[300]})")).status().code(),
            Code::kDataError);
  EXPECT_EQ(ValueFromJson(nlohmann::json::parse(R"({"dtype":"i32","shape":[1],"data":[1.5]})")).status().code(),
            Code::kDataError);
}

}  // namespace
}  // namespace rl

namespace rl {
namespace {

TEST(EnvelopeTest, EveryProtocolsOpsHaveNames) {
  EXPECT_EQ(OpName(1), "ping");
  EXPECT_EQ(OpName(10), "retire");
  EXPECT_EQ(OpName(32), "heartbeat");
  EXPECT_EQ(OpName(33), "probe");
  EXPECT_EQ(OpName(64), "info");
  EXPECT_EQ(OpName(67), "send");
  EXPECT_EQ(OpName(96), "call");
  EXPECT_EQ(OpName(0), "op0");
  EXPECT_EQ(OpName(11), "read");
  EXPECT_EQ(OpName(15), "op15");
  EXPECT_EQ(OpName(255), "op255");
}

}  // namespace
}  // namespace rl
