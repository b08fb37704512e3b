// The post-processor and decoder stages of a Hugging Face tokenizer.json.
//
// PostProcessor: null, ByteLevel (ids unchanged), TemplateProcessing (its "single" template:
// Llama 3's <|begin_of_text|> $A), RobertaProcessing and BertProcessing (cls $A sep), or a
// Sequence of those; it adds tokens only when add_special_tokens is asked for.
// Decoder: ByteLevel (each token's characters back to bytes, then UTF-8 with each invalid
// sequence as U+FFFD, as Rust's from_utf8_lossy does) or null (tokens joined by spaces).
// Any other type is a Config error naming it.
// Thread safety: immutable after Load.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/core/status.h"

namespace rl::tokenizer {

class PostProcessor {
 public:
  static Result<PostProcessor> Load(const nlohmann::json& j);
  // The ids the template puts around the encoded text (empty when there is no template).
  const std::vector<int64_t>& prefix() const { return prefix_; }
  const std::vector<int64_t>& suffix() const { return suffix_; }

 private:
  Status LoadOne(const nlohmann::json& j);
  std::vector<int64_t> prefix_, suffix_;
};

class Decoder {
 public:
  static Result<Decoder> Load(const nlohmann::json& j);
  std::string Decode(const std::vector<const std::string*>& tokens) const;

 private:
  bool byte_level_ = false;
};

}  // namespace rl::tokenizer
