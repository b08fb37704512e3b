// Reading a model directory's tokenizer: tokenizer.json or SentencePiece's tokenizer.model, and
// tokenizer_config.json beside it.
//
// tokenizer_config.json gives bos_token, eos_token, pad_token (a string, or an AddedToken object
// with "content"), add_bos_token, add_eos_token, chat_template (a string, or a list of
// {"name", "template"} of which "default" is taken) and model_max_length. These are exposed as
// they are; rendering the chat template is the caller's business.
// tokenizer.model (Llama 2's SentencePiece model, spm_tokenizer.h) is read where the directory has
// no tokenizer.json, or one HfTokenizer cannot read (Llama 2's own tokenizer.json is a
// SentencePiece-style BPE with byte fallback, which HfTokenizer does not support): both files
// describe the same tokenizer. Its add_bos_token and add_eos_token default to true and false
// (LlamaTokenizer's defaults) where tokenizer_config.json does not set them.
// Thread safety: functions without shared state.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "rl/core/status.h"
#include "rl/model/tokenizer/tokenizer.h"

namespace rl::tokenizer {

struct TokenizerConfig {
  std::string bos_token, eos_token, pad_token;  // "" where the file names none
  bool add_bos_token = false;
  bool add_eos_token = false;
  std::string chat_template;                 // "" where the file has none
  std::optional<int64_t> model_max_length;   // none where absent or a "no limit" value (>= 1e18)
};

// json_text: the content of a tokenizer_config.json. Wrong types are Config errors.
Result<TokenizerConfig> ParseTokenizerConfig(std::string_view json_text);

struct LoadedTokenizer {
  std::shared_ptr<const model::Tokenizer> tokenizer;
  TokenizerConfig config;  // defaults where the directory has no tokenizer_config.json
};

// Reads dir/tokenizer.json (or dir/tokenizer.model, see above) and, if present,
// dir/tokenizer_config.json. Neither tokenizer file is NotFound; an unreadable file IOError; a
// malformed or unsupported one Config (with both files: tokenizer.json's error when neither loads).
Result<LoadedTokenizer> LoadTokenizer(const std::string& dir);

}  // namespace rl::tokenizer
