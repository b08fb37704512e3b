// Regex: a compiled PCRE2 pattern (UTF and UCP, JIT-compiled where PCRE2 has a JIT) and the
// non-overlapping leftmost matches of it in a text, as the pre-tokenizers' Split needs.
// Thread safety: a Regex is immutable after Compile; FindAll may run from many threads at once
// (match data and the JIT stack are per thread).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "rl/core/status.h"

struct pcre2_real_code_8;

namespace rl::tokenizer {

class Regex {
 public:
  // A pattern PCRE2 refuses is a Config error naming the pattern and PCRE2's reason.
  static Result<std::shared_ptr<const Regex>> Compile(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls on_match(start, end) for each match, left to right, in byte offsets. An empty match
  // is skipped and the search moves on by one character. REQUIRES: text is valid UTF-8.
  Status FindAll(std::string_view text, const std::function<void(size_t, size_t)>& on_match) const;

 private:
  Regex(pcre2_real_code_8* code, std::string pattern) : code_(code), pattern_(std::move(pattern)) {}
  pcre2_real_code_8* code_;
  std::string pattern_;
};

}  // namespace rl::tokenizer
