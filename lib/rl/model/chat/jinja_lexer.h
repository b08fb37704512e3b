// Jinja's lexer, configured as transformers configures it for chat templates: trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, the default delimiters {{ }}, {% %}, {# #}.
//
// Before lexing, \r\n and \r become \n and one trailing newline is dropped (as Jinja does).
// Text between tags is data; "{%-"/"{{-"/"{#-" strip all whitespace before the tag and
// "-%}"/"-}}"/"-#}" all whitespace after it. trim_blocks removes the one newline after "%}" or
// "#}"; lstrip_blocks removes spaces and tabs between the start of a line and "{%" or "{#";
// "+%}" and "{%+" turn each off for that tag. Inside a tag, "}}"/"%}" only ends it when
// brackets are balanced. {% raw %}..{% endraw %} is data. Comments produce no tokens.
// Thread safety: pure function.
#pragma once

#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::chat::jinja {

enum class TokenType {
  kData,        // text between tags (value: the text)
  kVarBegin,    // {{
  kVarEnd,      // }}
  kBlockBegin,  // {%
  kBlockEnd,    // %}
  kName,        // identifier (value: the name)
  kString,      // string literal (value: the decoded text)
  kInteger,     // value: the digits, underscores removed ("0x1f" kept as written)
  kFloat,       // value: the literal, underscores removed
  kOperator,    // value: + - * / // % ** ~ == != < <= > >= = . : | , ; ( ) [ ] { }
  kEof,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

// A malformed template (an unclosed tag, comment or string, an unknown character) is a
// DataError "line N: ...".
Result<std::vector<Token>> Lex(const std::string& source);

}  // namespace rl::chat::jinja
