// Tokenizer: the interface every tokenizer implements (text <-> token ids).
//
// Implementations: CharTokenizer (lib/rl/model/tokenizer.h, the arithmetic demo's characters)
// and HfTokenizer (hf_tokenizer.h, Hugging Face tokenizer.json files: Qwen2/Qwen3, Llama 3).
// Ids are int64_t; an id no tokenizer gives is never returned by Encode. pad_id, bos_id and
// eos_id are -1 where the tokenizer has no such token (Qwen3 has no bos token).
// Thread safety: implementations are immutable after construction; any method may be called
// from any thread at once. This header does not include libtorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"

namespace rl::model {

struct EncodeOptions {
  // Run the post-processor's template (Llama 3's TemplateProcessing puts <|begin_of_text|> first).
  // Hugging Face's own default is true; ours is false, so that callers add specials explicitly.
  bool add_special_tokens = false;
  // True: the text of a special token ("<|im_start|>") in the input is that token. False: it is
  // ordinary text, split like any other (Hugging Face's split_special_tokens=True); use this for
  // untrusted text, so that a user cannot forge a turn boundary.
  bool parse_special_tokens = true;
};

struct DecodeOptions {
  bool skip_special_tokens = true;  // leave special tokens (pad, eos, <|im_end|>) out of the text
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  // Encode(text) is EncodeWith(text, EncodeOptions{}): no template tokens added.
  virtual Result<std::vector<int64_t>> Encode(std::string_view text) const = 0;
  // Decode(ids) is DecodeWith(ids, DecodeOptions{}): special tokens skipped.
  virtual Result<std::string> Decode(const std::vector<int64_t>& ids) const = 0;
  virtual Result<std::vector<int64_t>> EncodeWith(std::string_view text,
                                                  const EncodeOptions& options) const = 0;
  virtual Result<std::string> DecodeWith(const std::vector<int64_t>& ids,
                                         const DecodeOptions& options) const = 0;
  // One more than the largest id (an embedding table of this many rows covers every token).
  virtual int64_t vocab_size() const = 0;
  virtual int64_t pad_id() const = 0;
  virtual int64_t bos_id() const = 0;
  virtual int64_t eos_id() const = 0;
  // The token's string as the vocabulary spells it (byte-level files: "Ġworld" for " world").
  virtual std::optional<int64_t> TokenToId(std::string_view token) const = 0;
  virtual std::optional<std::string> IdToToken(int64_t id) const = 0;
  // A special token: skipped by Decode, not split when parse_special_tokens is true.
  virtual bool IsSpecial(int64_t id) const = 0;
};

}  // namespace rl::model
