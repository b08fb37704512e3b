// Llama 2's real tokenizer.model, read through libsentencepiece (SpmTokenizer via LoadTokenizer),
// against an independent implementation of the same tokenizer: llama-tokenizer-js (JavaScript,
// its own BPE over its own copy of the LLaMA vocabulary and merges), on tests/tokenizer/corpus.txt.
// Same ids on every line and on the whole file, without and with <s> first, and with the special
// tokens in the text parsed as Hugging Face's Llama tokenizer parses them; the same decoded text;
// and decode(encode(x)) == x with special tokens left as text, which SentencePiece guarantees
// for Llama 2's identity normalizer. Skipped, saying why, without the npm files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "rl/model/tokenizer/load.h"
#include "rl/model/tokenizer/reference_util.h"

namespace rl::tokenizer {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

const std::string kCorpus = std::string(RL_SOURCE_DIR) + "/tests/tokenizer/corpus.txt";

std::vector<std::string> CorpusCases() {
  const std::string all = testing::ReadAll(kCorpus);
  std::vector<std::string> cases;
  size_t start = 0;
  for (size_t nl; (nl = all.find('\n', start)) != std::string::npos; start = nl + 1) {
    cases.push_back(all.substr(start, nl - start));
  }
  if (start < all.size()) cases.push_back(all.substr(start));
  cases.push_back(all);
  return cases;
}

// A directory holding only tokenizer.model and tokenizer_config.json as Llama 2's has it: what a
// Llama-2-style model directory holds besides config.json and the weights.
std::string SpmDir() {
  const std::string dir = ::testing::TempDir() + "/llama2-spm-" + std::to_string(getpid());
  fs::create_directories(dir);
  fs::copy_file(testing::Llama2Model(), dir + "/tokenizer.model", fs::copy_options::overwrite_existing);
  std::ofstream(dir + "/tokenizer_config.json") << R"({"add_bos_token": true, "add_eos_token": false,
      "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "pad_token": null, "legacy": true,
      "tokenizer_class": "LlamaTokenizer", "model_max_length": 1000000000000000019884624838656})";
  return dir;
}

std::string Reference(const std::string& what) {
  bool ok = false;
  const std::string script = std::string(RL_SOURCE_DIR) + "/tests/tokenizer/llama2_reference.js";
  const std::string out = testing::RunCommand("node '" + script + "' '" + testing::NpmDir() + "' '" + what + "'", &ok);
  EXPECT_TRUE(ok) << "the reference failed: " << out;
  return out;
}

TEST(SpmReferenceTest, Llama2ModelGivesTheReferenceIdsOnEveryLine) {
  const std::string why = testing::Llama2Missing();
  if (!why.empty()) GTEST_SKIP() << why;
  const std::string out = Reference(kCorpus);
  auto loaded = LoadTokenizer(SpmDir());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  const model::Tokenizer& tok = *loaded->tokenizer;
  EXPECT_EQ(tok.vocab_size(), 32000);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  const std::vector<std::string> cases = CorpusCases();
  std::istringstream lines(out);
  size_t n = 0;
  model::EncodeOptions as_text, with_bos, parsed;
  as_text.parse_special_tokens = false;
  with_bos.parse_special_tokens = false;
  with_bos.add_special_tokens = true;
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, cases.size());
    const json ref = json::parse(line);
    const std::string& text = cases[n];
    SCOPED_TRACE("case " + std::to_string(n + 1) + ": " + text.substr(0, 80));
    auto ids = tok.EncodeWith(text, as_text);
    ASSERT_TRUE(ids.ok()) << ids.status().ToString();
    EXPECT_EQ(*ids, ref["ids"].get<std::vector<int64_t>>());
    // The reference gives nothing at all for "", where Hugging Face's LlamaTokenizer gives <s>.
    const auto ids_bos = text.empty() ? std::vector<int64_t>{1} : ref["ids_bos"].get<std::vector<int64_t>>();
    EXPECT_EQ(*tok.EncodeWith(text, with_bos), ids_bos);
    EXPECT_EQ(*tok.EncodeWith(text, parsed), ref["ids_special"].get<std::vector<int64_t>>());
    EXPECT_EQ(*tok.Decode(ref["ids"].get<std::vector<int64_t>>()), ref["decoded"].get<std::string>());
    EXPECT_EQ(*tok.Decode(*ids), text);  // the round trip
  }
  EXPECT_EQ(n, cases.size());
}

TEST(SpmReferenceTest, Llama2ModelHasTheReferenceVocabulary) {
  // The same pieces under the same ids: the model file, taken from an unrelated package, is
  // Llama 2's piece for piece.
  const std::string why = testing::Llama2Missing();
  if (!why.empty()) GTEST_SKIP() << why;
  const json vocab = json::parse(Reference("--vocab"));
  auto loaded = LoadTokenizer(SpmDir());
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(vocab.size(), 32000u);
  size_t same = 0;
  for (size_t id = 0; id < vocab.size(); ++id) same += loaded->tokenizer->IdToToken(id) == vocab[id].get<std::string>();
  EXPECT_EQ(same, vocab.size());
}

}  // namespace
}  // namespace rl::tokenizer
