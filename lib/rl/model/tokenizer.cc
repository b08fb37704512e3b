#include "rl/model/tokenizer.h"

#include <cstdio>

namespace rl::model {

CharTokenizer::CharTokenizer() : alphabet_(kAlphabet) {
  for (int16_t& id : id_of_) id = -1;
  for (size_t i = 0; i < alphabet_.size(); ++i) {
    id_of_[static_cast<unsigned char>(alphabet_[i])] = static_cast<int16_t>(3 + i);
  }
}

Result<std::vector<int64_t>> CharTokenizer::Encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (id_of_[ch] < 0) {
      char shown[8];
      std::snprintf(shown, sizeof(shown), ch >= 0x20 && ch < 0x7f ? "'%c'" : "0x%02x", ch);
      return Status::DataError("tokenizer: character " + std::string(shown) + " at offset " +
                               std::to_string(i) + " is not in the vocabulary");
    }
    ids.push_back(id_of_[ch]);
  }
  return ids;
}

Result<std::string> CharTokenizer::Decode(const std::vector<int64_t>& ids) const {
  return DecodeWith(ids, DecodeOptions{});
}

Result<std::vector<int64_t>> CharTokenizer::EncodeWith(std::string_view text,
                                                       const EncodeOptions&) const {
  return Encode(text);
}

std::optional<int64_t> CharTokenizer::TokenToId(std::string_view token) const {
  for (int64_t id = 0; id < vocab_size(); ++id) {
    if (*IdToToken(id) == token) return id;
  }
  return std::nullopt;
}

std::optional<std::string> CharTokenizer::IdToToken(int64_t id) const {
  static const char* const kSpecial[] = {"<pad>", "<bos>", "<eos>"};
  if (id < 0 || id >= vocab_size()) return std::nullopt;
  if (id < 3) return std::string(kSpecial[id]);
  return std::string(1, alphabet_[static_cast<size_t>(id - 3)]);
}

Result<std::string> CharTokenizer::DecodeWith(const std::vector<int64_t>& ids,
                                              const DecodeOptions& options) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size()) {
      return Status::DataError("tokenizer: id " + std::to_string(id) + " is outside [0, " +
                               std::to_string(vocab_size()) + ")");
    }
    if (id >= 3 || !options.skip_special_tokens) text += *IdToToken(id);
  }
  return text;
}

}  // namespace rl::model
