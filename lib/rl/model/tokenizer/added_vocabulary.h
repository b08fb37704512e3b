// AddedVocabulary: the "added_tokens" of tokenizer.json (special or not), found in the text
// before the model sees it, as tokenizers' AddedVocabulary does: leftmost-longest matches, a
// single_word token only where no alphanumeric character touches it, lstrip/rstrip taking the
// whitespace beside the match into the token. Tokens with normalized=false are found in the raw
// text; tokens with normalized=true in the normalized text, as their normalized content.
// Thread safety: immutable after Load; methods may run from many threads at once.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/core/status.h"
#include "rl/model/tokenizer/bpe.h"
#include "rl/model/tokenizer/pre_tokenizer.h"

namespace rl::tokenizer {

struct AddedToken {
  int64_t id = -1;
  std::string content;
  bool single_word = false, lstrip = false, rstrip = false, normalized = false, special = false;
};

// A piece of the input: an added token (id >= 0) or text for the model (id -1).
struct Piece {
  std::string text;
  int64_t id = -1;
};

class AddedVocabulary {
 public:
  // j: tokenizer.json's "added_tokens". Ids are the ones tokenizers gives, whatever the file
  // says: a token in the model's vocabulary has that id; others are numbered in file order
  // from the model's vocabulary size (tokenizers' AddedVocabulary::add_tokens).
  static Result<AddedVocabulary> Load(const nlohmann::json& j, const Bpe& model,
                                      const Normalizer& normalizer);

  // Splits text at added tokens (specials skipped when parse_special is false), normalizing
  // the text between them. REQUIRES: text is valid UTF-8.
  Result<std::vector<Piece>> Split(std::string_view text, const Normalizer& normalizer,
                                   bool parse_special) const;

  const AddedToken* ById(int64_t id) const;
  const AddedToken* ByContent(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Matcher {
    std::vector<size_t> patterns;              // indexes into tokens_
    std::vector<std::string> texts;            // what to look for, per pattern
    std::vector<std::vector<size_t>> by_first;  // 256 lists of patterns, longest first
  };
  void BuildMatcher(Matcher* m) const;
  void FindMatches(std::string_view text, const Matcher& m, bool parse_special,
                   std::vector<Piece>* out) const;

  std::vector<AddedToken> tokens_;
  std::unordered_map<int64_t, size_t> by_id_;
  std::unordered_map<std::string, size_t> by_content_;
  Matcher raw_, normalized_;
};

}  // namespace rl::tokenizer
