// The model files' fuzz entry point (tests/fuzz/model_target.cc) in the normal suite: valid seeds
// of every kind decode, every truncation and many corruptions of them are refused or decoded
// without a crash, and the saved corpus (tests/fuzz/corpus/model) replays. With RL_FUZZ_SEED_DIR
// set, the seeds are also written there: how the libFuzzer corpus was started.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "rl/model/config.h"
#include "rl/model/model_file.h"
#include "rl/model/safetensors.h"
#include "rl/queue/protocol.h"
#include "rl/queue/store.h"
#include "rl/train/adamw.h"
#include "rl/train/checkpoint.h"
#include "rl/train/sample.h"
#include "rl/wire/envelope.h"
#include "rl/wire/msgpack_io.h"
#include "targets.h"

namespace rl::train {
namespace {

model::ModelConfig TinyQwen3() {
  model::ModelConfig c;
  c.architecture = model::Architecture::kQwen3;
  c.vocab_size = 32;
  c.hidden_size = 16;
  c.intermediate_size = 24;
  c.num_hidden_layers = 1;
  c.num_attention_heads = 2;
  c.num_key_value_heads = 1;
  c.head_dim = 8;
  c.max_position_embeddings = 32;
  return c;
}

Tensor RoutesOf(int64_t tokens) {  // [N, 2, 2] u8: layers 2, experts per token 2 of 4
  Tensor t;
  t.dtype = DType::kU8;
  t.shape = {tokens, 2, 2};
  for (int64_t i = 0; i < tokens * 2; ++i) {
    t.data.push_back(static_cast<char>(i % 4));
    t.data.push_back(static_cast<char>((i + 1) % 4));
  }
  return t;
}

// A get reply's body: two groups of two rows, the last with routes, one with a loss mask.
std::string RowsBody() {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(2);
  PackString(pk, "lease");
  pk.pack_uint64(1);
  PackString(pk, "rows");
  pk.pack_array(4);
  for (uint64_t i = 0; i < 4; ++i) {
    std::vector<std::pair<std::string, Value>> cols = {
        {"group", static_cast<int64_t>(i / 2)},
        {"prompt_ids", Tensor::FromI64({1, 5, 6})},
        {"response_ids", Tensor::FromI64({7, static_cast<int64_t>(8 + i), 2})},
        {"logprobs", Tensor::FromF32({-0.5f, -1.0f, -0.25f})},
        {"reward", static_cast<double>(i % 2)},
        {"version", int64_t{0}}};
    if (i == 1) cols.emplace_back("loss_mask", Tensor::FromI64({1, 0, 1}));
    if (i >= 2) cols.emplace_back("routes", RoutesOf(5));
    pk.pack_map(static_cast<uint32_t>(cols.size() + 1));
    PackString(pk, queue::kIndexField);
    pk.pack_uint64(10 + i);
    for (const auto& [name, v] : cols) {
      PackString(pk, name);
      PackValue(pk, v, nullptr);
    }
  }
  return std::string(buf.data(), buf.size());
}

struct Seed {
  std::string kind, bytes;
};

std::vector<Seed> Seeds() {
  std::vector<Seed> seeds;
  at::manual_seed(3);
  auto st = model::EncodeSafetensors({{"a", at::randn({2, 3})}, {"b", at::arange(4, at::kLong)}}, {{"key", "value"}});
  seeds.push_back({"safetensors", st.value()});
  model::Transformer net = model::Transformer::Create(TinyQwen3(), 1).value();
  seeds.push_back({"model", model::EncodeModel(net, 3).value()});
  Checkpoint c;
  c.step = 2;
  c.version = 2;
  c.cursor = 5;
  c.rng = "1 2 3";
  c.consumed = {10, 11};
  c.model = net.Clone().value();
  AdamW adam(c.model->NamedParameters(), AdamWOptions{});
  c.adam = adam.State();
  seeds.push_back({"checkpoint", EncodeCheckpoint(c).value()});
  model::ModelConfig moe = TinyQwen3();
  moe.architecture = model::Architecture::kQwen3Moe;
  moe.moe.num_experts = 4;
  moe.moe.num_experts_per_tok = 2;
  moe.moe.moe_intermediate_size = 8;
  seeds.push_back({"config", model::ConfigToString(moe)});
  seeds.push_back({"rows", RowsBody()});
  return seeds;
}

void Feed(const std::string& kind, std::string_view bytes) {
  const std::string input = kind + "|#|" + std::string(bytes);
  rl::fuzz::FuzzModelFiles(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

TEST(ModelFilesFuzzTest, EverySeedDecodes) {
  const std::vector<Seed> seeds = Seeds();
  EXPECT_TRUE(model::DecodeSafetensors(seeds[0].bytes).ok());
  auto m = model::DecodeModel(seeds[1].bytes);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->version, 3u);
  auto c = DecodeCheckpoint(seeds[2].bytes);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->consumed, (std::vector<uint64_t>{10, 11}));
  EXPECT_TRUE(model::ConfigFromString(seeds[3].bytes).ok());
  Message reply;
  reply.body = seeds[4].bytes;
  auto got = queue::DecodeGetReply(reply);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const SortedRows sorted = SortRows(got->rows, RouteLimits{2, 2, 4});
  ASSERT_TRUE(sorted.error.ok()) << sorted.error.ToString();
  ASSERT_EQ(sorted.groups.size(), 2u);
  EXPECT_EQ(sorted.groups[1].samples[0].routes.size(), 5u * 2 * 2);
  for (const Seed& s : seeds) Feed(s.kind, s.bytes);
  if (const char* dir = std::getenv("RL_FUZZ_SEED_DIR")) {
    for (const Seed& s : seeds) std::ofstream(std::string(dir) + "/seed-" + s.kind, std::ios::binary) << s.kind << "|#|" << s.bytes;
  }
}

// Every truncation of a seed's first 512 bytes (its header) and 64 more through its data, every
// byte of that header flipped, and 1024 inputs with 1 to 4 random bytes set anywhere (more with
// RL_FUZZ_ROUNDS, for a longer search by hand): each input is refused or decoded, never a crash.
TEST(ModelFilesFuzzTest, TruncatedAndCorruptedSeedsAreRefusedOrDecoded) {
  std::mt19937_64 rng(7);
  const char* rounds_env = std::getenv("RL_FUZZ_ROUNDS");
  const int rounds = rounds_env ? std::atoi(rounds_env) : 1024;
  for (const Seed& s : Seeds()) {
    const size_t n = s.bytes.size(), head = std::min<size_t>(n, 512);
    for (size_t len = 0; len < head; ++len) Feed(s.kind, std::string_view(s.bytes).substr(0, len));
    for (size_t k = 1; k <= 64; ++k) Feed(s.kind, std::string_view(s.bytes).substr(0, head + (n - head) * k / 65));
    for (size_t at = 0; at < head; ++at) {
      std::string b = s.bytes;
      b[at] = static_cast<char>(b[at] ^ 0xFF);
      Feed(s.kind, b);
    }
    for (int i = 0; i < rounds; ++i) {
      std::string b = s.bytes;
      for (uint64_t k = 0, m = 1 + rng() % 4; k < m; ++k) {
        // Half of them in the header, where the structure is.
        b[(rng() % 2 ? rng() % head : rng() % n)] = static_cast<char>(rng());
      }
      Feed(s.kind, b);
    }
  }
}

// A checkpoint whose rl_config asks for far more parameters than its tensors hold is refused
// before a model of that config is built (which would allocate what the config says).
TEST(ModelFilesFuzzTest, ACheckpointsConfigMustMatchItsTensorsBeforeAnythingIsBuilt) {
  auto contents = model::DecodeSafetensors(Seeds()[2].bytes).value();
  model::ModelConfig huge = TinyQwen3();
  huge.hidden_size = int64_t{1} << 14;
  huge.intermediate_size = int64_t{1} << 16;
  huge.num_hidden_layers = 64;  // 2e11 parameters: 800 GB in float32
  contents.metadata["rl_config"] = model::ConfigToString(huge);
  const std::string bytes = model::EncodeSafetensors(contents.tensors, contents.metadata).value();
  auto c = DecodeCheckpoint(bytes);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), Code::kDataError) << c.status().ToString();
}

TEST(ModelFilesFuzzTest, TheSavedCorpusReplays) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(RL_SOURCE_DIR) + "/tests/fuzz/corpus/model")) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string bytes = ss.str();
    rl::fuzz::FuzzModelFiles(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  EXPECT_GE(n, 5u);
}

}  // namespace
}  // namespace rl::train
