// The normalizer and pre-tokenizer stages of a Hugging Face tokenizer.json.
//
// Normalizer: null, NFC, NFD, NFKC, NFKD (through ICU) or a Sequence of those.
// PreTokenizer: null, Split (Regex or String pattern, any behavior, invert), ByteLevel
// (add_prefix_space, use_regex with GPT-2's pattern) or a Sequence of those. Each stage splits
// every piece the previous one made; ByteLevel also maps each piece's bytes to the byte-level
// alphabet. Any other type is a Config error naming it.
// Thread safety: immutable after Load; methods may run from many threads at once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/core/status.h"
#include "rl/model/tokenizer/regex.h"
#include "rl/model/tokenizer/unicode.h"

namespace rl::tokenizer {

class Normalizer {
 public:
  // j: tokenizer.json's "normalizer" (null: no normalization).
  static Result<Normalizer> Load(const nlohmann::json& j);
  bool empty() const { return forms_.empty(); }
  // REQUIRES: text is valid UTF-8.
  Result<std::string> Apply(std::string_view text) const;

 private:
  std::vector<NormalForm> forms_;
};

class PreTokenizer {
 public:
  // j: tokenizer.json's "pre_tokenizer" (null: the whole text is one piece).
  static Result<PreTokenizer> Load(const nlohmann::json& j);
  // Replaces *pieces with the pieces each stage splits them into (empty pieces dropped).
  Status Apply(std::vector<std::string>* pieces) const;

 private:
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Stage {
    enum Kind { kSplit, kByteLevel } kind;
    std::shared_ptr<const Regex> regex;  // kSplit, and kByteLevel with use_regex
    std::string literal;                 // kSplit with a String pattern
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;
  };
  static Status LoadStage(const nlohmann::json& j, std::vector<Stage>* stages);
  static Status Split(const Stage& stage, const std::string& piece, std::vector<std::string>* out);
  std::vector<Stage> stages_;
};

}  // namespace rl::tokenizer
