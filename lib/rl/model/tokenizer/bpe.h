// Bpe: the "BPE" model of a Hugging Face tokenizer.json. A word (one pre-token, already in the
// byte-level alphabet) becomes its characters' ids, then the adjacent pair of lowest merge rank
// is merged, leftmost first, until no pair has a merge (tokenizers' Word::merge_all).
// With ignore_merges (Llama 3) a word that is itself in the vocabulary is that one token.
// Thread safety: immutable after Load; Tokenize may run from many threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/core/status.h"

namespace rl::tokenizer {

class Bpe {
 public:
  // model: the "model" object of tokenizer.json. A missing or mistyped field, a merge naming a
  // token outside the vocabulary, dropout or byte_fallback is a Config error saying which.
  static Result<Bpe> Load(const nlohmann::json& model);

  // Appends the ids of word to *ids. A character with no token is a DataError when the model
  // has no unk_token (tokenizers drops it silently; we refuse).
  Status Tokenize(std::string_view word, std::vector<int64_t>* ids) const;

  std::optional<int64_t> TokenToId(std::string_view token) const;
  const std::string* IdToToken(int64_t id) const;
  int64_t size() const { return static_cast<int64_t>(vocab_.size()); }  // tokens, not max id + 1
  int64_t max_id() const { return static_cast<int64_t>(id_to_token_.size()) - 1; }

 private:
  struct Merge {
    uint32_t rank;
    uint32_t new_id;
  };
  // Merges in an open-addressing table keyed by the pair's ids (a node-based map spent most of
  // the encoding time in cache misses).
  struct Slot {
    uint64_t key = kEmpty;
    Merge merge{0, 0};
  };
  static constexpr uint64_t kEmpty = ~uint64_t{0};
  static uint64_t PairKey(uint32_t a, uint32_t b) { return (uint64_t{a} << 32) | b; }
  static size_t Hash(uint64_t key) {
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return static_cast<size_t>(key);
  }
  const Merge* FindMerge(uint32_t a, uint32_t b) const;
  void BuildMergeTable();
  Status AddMerge(const std::string& a, const std::string& b, uint32_t rank);
  Status MergeWord(std::string_view word, std::vector<int64_t>* ids) const;

  std::unordered_map<std::string, uint32_t> vocab_;
  std::vector<std::string> id_to_token_;  // "" where no token has that id
  std::vector<bool> has_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // while loading
  std::vector<Slot> table_;                     // merges_ for lookups
  // The id of each byte-level stand-in character (code points below 512) spelled alone, -1
  // where it has none; used when there is no prefix or suffix to add.
  std::vector<int32_t> char_id_;
  std::optional<uint32_t> unk_id_;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::string prefix_;  // continuing_subword_prefix
  std::string suffix_;  // end_of_word_suffix
};

}  // namespace rl::tokenizer
