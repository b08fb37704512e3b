#include "rl/env/protocol.h"

#include <gtest/gtest.h>

#include <random>

#include "rl/wire/msgpack_io.h"

namespace rl::env {
namespace {

TEST(EnvProtocolTest, RequestsAndRepliesRoundTrip) {
  std::vector<ToolCall> calls = {{"calc", "\"12*34\""}, {"search", "{\"q\": \"x\\ny\"}"}, {"", ""}};
  auto back = DecodeCallRequest(EncodeCallRequest(calls));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), 3u);
  EXPECT_EQ((*back)[1].name, "search");
  EXPECT_EQ((*back)[1].arguments, "{\"q\": \"x\\ny\"}");

  CallReply reply;
  reply.results.push_back(ToolResult{true, "408", "", "", std::nullopt});
  reply.results.push_back(Failed(kKindTimeout, "gave no reply"));
  reply.results.push_back(ToolResult{true, "ok", "", "", -0.25});
  reply.seconds = 1.25;
  auto r = DecodeCallReply(EncodeCallReply(reply));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->results.size(), 3u);
  EXPECT_TRUE(r->results[0].ok);
  EXPECT_EQ(r->results[0].output, "408");
  EXPECT_FALSE(r->results[0].reward.has_value());
  EXPECT_EQ(r->results[2].reward, -0.25);
  EXPECT_FALSE(r->results[1].ok);
  EXPECT_EQ(r->results[1].kind, "timeout");
  EXPECT_EQ(r->results[1].error, "gave no reply");
  EXPECT_DOUBLE_EQ(r->seconds, 1.25);

  auto p = DecodePingReply(EncodePingReply({5, {"calc", "py"}, 3}));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->tools, (std::vector<std::string>{"calc", "py"}));
  EXPECT_EQ(p->workers, 3u);
}

std::string Pack(const std::function<void(Packer&)>& f) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  f(pk);
  return std::string(buf.data(), buf.size());
}

TEST(EnvProtocolTest, MalformedBodiesAreProtocolOrDataErrors) {
  std::vector<std::string> bodies = {
      "", "\xc1", "\x81", "\x90",
      Pack([](Packer& pk) { pk.pack_map(0); }),
      Pack([](Packer& pk) { pk.pack_map(1); PackString(pk, "calls"); pk.pack_int(3); }),
      Pack([](Packer& pk) { pk.pack_map(1); PackString(pk, "calls"); pk.pack_array(1); pk.pack_int(3); }),
      Pack([](Packer& pk) {
        pk.pack_map(1); PackString(pk, "calls"); pk.pack_array(1); pk.pack_map(1); PackString(pk, "name");
        pk.pack_int(1);
      }),
      EncodeCallRequest({{"calc", "1"}}) + "x",  // trailing bytes
  };
  for (const std::string& b : bodies) {
    auto r = DecodeCallRequest(b);
    ASSERT_FALSE(r.ok()) << testing::PrintToString(b);
    EXPECT_TRUE(r.status().code() == Code::kProtocol || r.status().code() == Code::kDataError) << r.status().ToString();
    auto reply = DecodeCallReply(b);
    EXPECT_FALSE(reply.ok());
  }
  // A result that is neither {output} nor {error, kind}.
  std::string both = Pack([](Packer& pk) {
    pk.pack_map(1); PackString(pk, "results"); pk.pack_array(1); pk.pack_map(2);
    PackString(pk, "output"); PackString(pk, "a"); PackString(pk, "error"); PackString(pk, "b");
  });
  EXPECT_EQ(DecodeCallReply(both).status().code(), Code::kProtocol);
}

TEST(EnvProtocolTest, TooManyCallsAreRefused) {
  std::vector<ToolCall> calls(kMaxCallsPerRequest + 1, ToolCall{"calc", "1"});
  EXPECT_EQ(DecodeCallRequest(EncodeCallRequest(calls)).status().code(), Code::kInvalidArgument);
}

TEST(EnvProtocolTest, RandomAndTruncatedBytesNeverCrash) {
  std::mt19937_64 rng(11);
  std::string good = EncodeCallRequest({{"calc", "\"1+2\""}, {"py", "{\"expression\": \"2**8\"}"}});
  CallReply reply;
  reply.results = {ToolResult{true, "3", "", "", 1.5}, Failed(kKindCrashed, "x")};
  std::string good_reply = EncodeCallReply(reply);
  for (int i = 0; i < 20000; ++i) {
    std::string b;
    if (i % 3 == 0) {
      b.resize(rng() % 64);
      for (char& c : b) c = static_cast<char>(rng());
    } else {
      b = (i % 3 == 1 ? good : good_reply).substr(0, rng() % good.size());
      if (!b.empty() && rng() % 2) b[rng() % b.size()] = static_cast<char>(rng());
    }
    auto r = DecodeCallRequest(b);
    if (!r.ok()) {
      EXPECT_NE(r.status().code(), Code::kInternal);
    }
    auto q = DecodeCallReply(b);
    if (!q.ok()) {
      EXPECT_NE(q.status().code(), Code::kInternal);
    }
  }
}

}  // namespace
}  // namespace rl::env
