// SpmTokenizer on a small SentencePiece model written here (the protobuf by hand, so that these
// tests need no download), and malformed tokenizer.model files: truncated, garbage and mutated
// files are one-line Config errors, never a crash. The comparison with Hugging Face tokenizers on
// Llama 2's real model is spm_reference_test.cc.
#include "rl/model/tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "rl/model/tokenizer/load.h"
#include "rl/model/tokenizer/reference_util.h"

namespace rl::tokenizer {
namespace {

// Protobuf wire format, as much as a ModelProto needs.
void Varint(uint64_t v, std::string* out) {
  do {
    out->push_back(static_cast<char>((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
    v >>= 7;
  } while (v != 0);
}
void Field(int number, const std::string& bytes, std::string* out) {  // length-delimited
  Varint(static_cast<uint64_t>(number) << 3 | 2, out);
  Varint(bytes.size(), out);
  *out += bytes;
}
void Int(int number, uint64_t v, std::string* out) {
  Varint(static_cast<uint64_t>(number) << 3, out);
  Varint(v, out);
}
void Float(int number, float f, std::string* out) {
  Varint(static_cast<uint64_t>(number) << 3 | 5, out);
  char b[4];
  std::memcpy(b, &f, 4);
  out->append(b, 4);
}

enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kByte = 6 };

// A BPE model with byte fallback in Llama 2's layout: <unk> <s> </s>, the 256 byte pieces, then
// "▁" "a" "b" "c" "▁a" "ab" "▁ab" "bc" with falling scores (higher merges first).
std::string TinyModel() {
  std::string model;
  auto piece = [&](const std::string& text, float score, int type) {
    std::string p;
    Field(1, text, &p);
    Float(2, score, &p);
    Int(3, type, &p);
    Field(1, p, &model);
  };
  piece("<unk>", 0, kUnknown);
  piece("<s>", 0, kControl);
  piece("</s>", 0, kControl);
  char hex[8];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
    piece(hex, 0, kByte);
  }
  const char* normal[] = {"\xE2\x96\x81", "a", "b", "c", "\xE2\x96\x81" "a", "ab", "\xE2\x96\x81" "ab", "bc"};
  float score = -1;
  for (const char* n : normal) piece(n, score--, kNormal);
  std::string trainer, normalizer;
  Int(3, 2, &trainer);    // model_type: BPE
  Int(35, 1, &trainer);   // byte_fallback
  Int(40, 0, &trainer);   // unk_id
  Int(41, 1, &trainer);   // bos_id
  Int(42, 2, &trainer);   // eos_id
  Int(43, static_cast<uint64_t>(-1), &trainer);  // pad_id: none
  Field(2, trainer, &model);
  Field(1, "identity", &normalizer);
  Int(3, 1, &normalizer);  // add_dummy_prefix
  Int(4, 0, &normalizer);  // remove_extra_whitespaces: no (Llama 2)
  Int(5, 1, &normalizer);  // escape_whitespaces
  Field(3, normalizer, &model);
  return model;
}

constexpr int64_t kBytes = 3;                       // id of <0x00>
constexpr int64_t kMeta = 259, kA = 260, kB = 261;  // "▁" "a" "b"
constexpr int64_t kMetaA = 263, kMetaAb = 265;

std::shared_ptr<const SpmTokenizer> Tiny(const SpmOptions& o = {}) {
  auto t = SpmTokenizer::FromModel(TinyModel(), o);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : nullptr;
}

TEST(SpmTokenizerTest, EncodesWithTheDummyPrefixAndByteFallback) {
  auto t = Tiny();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->vocab_size(), 267);
  EXPECT_EQ(t->bos_id(), 1);
  EXPECT_EQ(t->eos_id(), 2);
  EXPECT_EQ(t->pad_id(), -1);
  EXPECT_EQ(*t->Encode("ab"), (std::vector<int64_t>{kMetaAb}));
  EXPECT_EQ(*t->Encode("a b"), (std::vector<int64_t>{kMetaA, kMeta, kB}));
  // "é" is no piece: its two UTF-8 bytes, as byte pieces.
  EXPECT_EQ(*t->Encode("\xC3\xA9"), (std::vector<int64_t>{kMeta, kBytes + 0xC3, kBytes + 0xA9}));
  EXPECT_EQ(*t->Encode(""), (std::vector<int64_t>{}));
  for (const std::string text : {"ab", " a  b\n", "\xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80", "<s>a</s>", "  "}) {
    model::EncodeOptions as_text;
    as_text.parse_special_tokens = false;
    EXPECT_EQ(*t->Decode(*t->EncodeWith(text, as_text)), text);
  }
}

TEST(SpmTokenizerTest, SpecialTokensSplitTheTextAndEachPartHasItsOwnPrefix) {
  auto t = Tiny();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(*t->Encode("a<s>b"), (std::vector<int64_t>{kMetaA, 1, kMeta, kB}));
  EXPECT_EQ(*t->Encode("</s><s>"), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(*t->Encode("<unk>"), (std::vector<int64_t>{0}));
  model::EncodeOptions as_text;
  as_text.parse_special_tokens = false;
  EXPECT_EQ(t->EncodeWith("<s>", as_text)->size(), 4u);  // "▁" "<" "s" ">" as bytes and pieces
  model::EncodeOptions add;
  add.add_special_tokens = true;
  EXPECT_EQ(*t->EncodeWith("a", add), (std::vector<int64_t>{1, kMetaA}));
  SpmOptions both;
  both.add_eos = true;
  EXPECT_EQ(*Tiny(both)->EncodeWith("a", add), (std::vector<int64_t>{1, kMetaA, 2}));
  EXPECT_TRUE(t->IsSpecial(0) && t->IsSpecial(1) && t->IsSpecial(2));
  EXPECT_FALSE(t->IsSpecial(kA) || t->IsSpecial(kBytes) || t->IsSpecial(-1) || t->IsSpecial(267));
}

TEST(SpmTokenizerTest, DecodesAsTokenizersLlamaDecoderDoes) {
  auto t = Tiny();
  ASSERT_NE(t, nullptr);
  const std::vector<int64_t> ids = {1, kMetaA, 2, kMeta, kB, kBytes + 0xC3, kBytes + 0xA9, 999, -5};
  EXPECT_EQ(*t->Decode(ids), "a b\xC3\xA9");  // specials and unknown ids skipped, one leading space dropped
  EXPECT_EQ(*t->DecodeWith(ids, {false}), "<s> a</s> b\xC3\xA9");
  // A byte run that is not UTF-8: one U+FFFD per byte.
  EXPECT_EQ(*t->Decode({kA, kBytes + 0xC3, kB, kBytes + 0xE2, kBytes + 0x96}),
            "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(SpmTokenizerTest, TokenNamesAndSpecialOptions) {
  auto t = Tiny();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->TokenToId("\xE2\x96\x81" "ab"), kMetaAb);
  EXPECT_EQ(t->TokenToId("zz"), std::nullopt);  // sentencepiece would say <unk>
  EXPECT_EQ(t->IdToToken(kBytes + 10), "<0x0A>");
  EXPECT_EQ(t->IdToToken(267), std::nullopt);
  SpmOptions o;
  o.names.pad = "</s>";
  EXPECT_EQ(Tiny(o)->pad_id(), 2);
  o.names.pad = "<pad>";
  auto bad = SpmTokenizer::FromModel(TinyModel(), o);
  EXPECT_EQ(bad.status().code(), Code::kConfig);
  EXPECT_EQ(bad.status().message(), "tokenizer: special token '<pad>' is not in the vocabulary");
}

TEST(SpmTokenizerTest, TextThatIsNotUtf8IsADataError) {
  auto t = Tiny();
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->Encode("a\xFF").status().code(), Code::kDataError);
}

void ExpectOneLineConfigError(const std::string& bytes, const std::string& what) {
  auto t = SpmTokenizer::FromModel(bytes);
  if (t.ok()) return;  // some mutations are still models; they must then work
  EXPECT_EQ(t.status().code(), Code::kConfig) << what << ": " << t.status().ToString();
  EXPECT_EQ(t.status().message().find('\n'), std::string::npos) << what << ": " << t.status().message();
  EXPECT_EQ(t.status().message().rfind("tokenizer", 0), 0u) << t.status().message();
}

// Whatever loads must encode and decode without crashing.
void Exercise(const std::string& bytes) {
  auto t = SpmTokenizer::FromModel(bytes);
  if (!t.ok()) return;
  for (bool special : {true, false}) {
    model::EncodeOptions o;
    o.parse_special_tokens = o.add_special_tokens = special;
    auto ids = (*t)->EncodeWith("Hello <s>w\xC3\xB6rld</s>  \n\xF0\x9F\x98\x80 42", o);
    if (ids.ok()) (void)(*t)->Decode(*ids);
  }
  (void)(*t)->Decode({-1, 0, 1, 2, 3, 100, 1 << 30});
}

TEST(SpmTokenizerTest, MalformedModelsAreOneLineConfigErrors) {
  EXPECT_EQ(SpmTokenizer::FromModel("").status().message(), "tokenizer.model: empty file");
  EXPECT_EQ(SpmTokenizer::FromModel("{\"model\": {}}").status().code(), Code::kConfig);
  const std::string model = TinyModel();
  for (size_t n = 1; n < model.size(); ++n) {  // every truncation
    ExpectOneLineConfigError(model.substr(0, n), "truncated to " + std::to_string(n));
    Exercise(model.substr(0, n));
  }
  std::mt19937 rng(13);
  for (int i = 0; i < 3000; ++i) {  // random bytes flipped, inserted and removed
    std::string m = model;
    for (int k = 0, edits = 1 + static_cast<int>(rng() % 4); k < edits; ++k) {
      const size_t at = rng() % m.size();
      switch (rng() % 3) {
        case 0: m[at] = static_cast<char>(rng()); break;
        case 1: m.insert(at, 1, static_cast<char>(rng())); break;
        default: m.erase(at, 1);
      }
    }
    ExpectOneLineConfigError(m, "mutation " + std::to_string(i));
    Exercise(m);
  }
  for (int i = 0; i < 200; ++i) {  // garbage
    std::string g(1 + rng() % 2000, '\0');
    for (char& c : g) c = static_cast<char>(rng());
    ExpectOneLineConfigError(g, "garbage " + std::to_string(i));
    Exercise(g);
  }
}

TEST(SpmTokenizerTest, TruncatedLlama2ModelsAreConfigErrors) {
  // The real file cut at 300 places: protobuf fields end mid-piece, the trainer spec goes missing.
  if (!testing::FileExists(testing::Llama2Model())) GTEST_SKIP() << testing::Llama2Missing();
  const std::string model = testing::ReadAll(testing::Llama2Model());
  ASSERT_TRUE(SpmTokenizer::FromModel(model).ok());
  std::mt19937 rng(2);
  for (int i = 0; i < 300; ++i) {
    const size_t n = i < 16 ? static_cast<size_t>(i) + 1 : rng() % model.size();
    ExpectOneLineConfigError(model.substr(0, n), "truncated to " + std::to_string(n));
    Exercise(model.substr(0, n));
  }
}

class SpmDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/spm-dir-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void Write(const std::string& name, const std::string& bytes) {
    std::ofstream(dir_ + "/" + name, std::ios::binary) << bytes;
  }
  std::string dir_;
};

TEST_F(SpmDirTest, ADirectoryWithOnlyTokenizerModelLoadsItWithLlamaDefaults) {
  Write("tokenizer.model", TinyModel());
  auto t = LoadTokenizer(dir_);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->config.add_bos_token);  // LlamaTokenizer's default, no tokenizer_config.json
  model::EncodeOptions add;
  add.add_special_tokens = true;
  EXPECT_EQ(*t->tokenizer->EncodeWith("a", add), (std::vector<int64_t>{1, kMetaA}));
  Write("tokenizer_config.json", R"({"add_bos_token": false, "add_eos_token": true, "eos_token": "</s>"})");
  t = LoadTokenizer(dir_);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->config.add_bos_token);
  EXPECT_EQ(*t->tokenizer->EncodeWith("a", add), (std::vector<int64_t>{kMetaA, 2}));
}

TEST_F(SpmDirTest, AnUnsupportedTokenizerJsonBesideItGivesWayToTheModel) {
  // Llama 2's own tokenizer.json (Prepend/Replace normalizers, byte fallback) is not read by
  // HfTokenizer; its tokenizer.model is the same tokenizer.
  Write("tokenizer.json", R"({"model": {"type": "Unigram"}})");
  Write("tokenizer.model", TinyModel());
  auto t = LoadTokenizer(dir_);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->tokenizer->vocab_size(), 267);
  Write("tokenizer.model", "garbage");
  t = LoadTokenizer(dir_);
  EXPECT_EQ(t.status().code(), Code::kConfig);
  EXPECT_EQ(t.status().message().find('\n'), std::string::npos);
  EXPECT_NE(t.status().message().find(dir_ + "/tokenizer.json: model type 'Unigram'"), std::string::npos);
  EXPECT_NE(t.status().message().find(dir_ + "/tokenizer.model: not a SentencePiece model"), std::string::npos)
      << t.status().message();
}

TEST_F(SpmDirTest, AMalformedModelAloneIsAConfigErrorNamingTheFile) {
  Write("tokenizer.model", TinyModel().substr(0, 100));
  auto t = LoadTokenizer(dir_);
  EXPECT_EQ(t.status().code(), Code::kConfig);
  EXPECT_EQ(t.status().message().rfind(dir_ + "/tokenizer.model: ", 0), 0u) << t.status().message();
}

}  // namespace
}  // namespace rl::tokenizer
