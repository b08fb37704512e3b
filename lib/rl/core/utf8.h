// UTF-8 encoding of one code point, shared by the tokenizer and the chat-template interpreter.
// Thread safety: a pure function.
#pragma once

#include <string>

namespace rl {

// Appends the UTF-8 bytes of cp (1 to 4 bytes). REQUIRES: cp <= 0x10FFFF.
void AppendUtf8(char32_t cp, std::string* out);

}  // namespace rl
