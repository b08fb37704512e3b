// CharTokenizer, the one-character-per-token vocabulary of the arithmetic demo task. The Tokenizer
// interface lives in rl/model/tokenizer/tokenizer.h (included here); share/models/addition-tiny
// holds the same vocabulary as a Hugging Face tokenizer.json.
//
// CharTokenizer ids (vocab_size 15):
//   0 <pad>   1 <bos>   2 <eos>   3..12 "0".."9"   13 "+"   14 "="
// Encode maps each character to its id and adds no special tokens; the caller adds <bos>/<eos>.
// A character outside the vocabulary is a DataError. Decode renders ordinary tokens and skips
// <pad>, <bos> and <eos>; an id outside [0, vocab_size) is a DataError. EncodeWith ignores its
// options (no template; "<bos>" is not in the alphabet). DecodeWith with skip_special_tokens
// false renders specials by name. Tokens are named "<pad>" "<bos>" "<eos>" "0".."9" "+" "=".
// Thread safety: Tokenizer implementations are immutable after construction; any method may be
// called from any thread at once. This header does not include libtorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/tokenizer/tokenizer.h"

namespace rl::model {

class CharTokenizer final : public Tokenizer {
 public:
  static constexpr int64_t kPad = 0;
  static constexpr int64_t kBos = 1;
  static constexpr int64_t kEos = 2;
  static constexpr const char* kAlphabet = "0123456789+=";  // ids 3.. in this order

  CharTokenizer();

  Result<std::vector<int64_t>> Encode(std::string_view text) const override;
  Result<std::string> Decode(const std::vector<int64_t>& ids) const override;
  Result<std::vector<int64_t>> EncodeWith(std::string_view text,
                                          const EncodeOptions& options) const override;
  Result<std::string> DecodeWith(const std::vector<int64_t>& ids,
                                 const DecodeOptions& options) const override;
  std::optional<int64_t> TokenToId(std::string_view token) const override;
  std::optional<std::string> IdToToken(int64_t id) const override;
  bool IsSpecial(int64_t id) const override { return id >= 0 && id < 3; }
  int64_t vocab_size() const override { return 3 + static_cast<int64_t>(alphabet_.size()); }
  int64_t pad_id() const override { return kPad; }
  int64_t bos_id() const override { return kBos; }
  int64_t eos_id() const override { return kEos; }

 private:
  std::string alphabet_;
  int16_t id_of_[256];  // -1 for characters outside the vocabulary
};

}  // namespace rl::model
