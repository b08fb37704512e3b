// Reading a model directory's tokenizer: tokenizer.json, and tokenizer_config.json beside it.
//
// tokenizer_config.json gives bos_token, eos_token, pad_token (a string, or an AddedToken object
// with "content"), add_bos_token, add_eos_token, chat_template (a string, or a list of
// {"name", "template"} of which "default" is taken) and model_max_length. These are exposed as
// they are; rendering the chat template is the caller's business.
// Llama 2's SentencePiece tokenizer.model is not read: a directory with only that file gets a
// Config error that says so.
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

// Reads dir/tokenizer.json and, if present, dir/tokenizer_config.json. A missing tokenizer.json
// is NotFound; an unreadable file IOError; a malformed or unsupported one Config.
Result<LoadedTokenizer> LoadTokenizer(const std::string& dir);

}  // namespace rl::tokenizer
