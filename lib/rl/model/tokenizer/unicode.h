// UTF-8 and Unicode helpers for the Hugging Face tokenizer: validation, the byte-level alphabet
// (GPT-2's bytes_to_unicode), lossy decoding as Rust's String::from_utf8_lossy does it, Unicode
// character classes as Rust's char methods define them, and normalization (through ICU).
// Thread safety: pure functions over immutable tables; safe from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rl/core/status.h"

#include "rl/core/utf8.h"

namespace rl::tokenizer {

// Reads the code point at *pos and moves *pos past it. REQUIRES: text is valid UTF-8.
char32_t NextCodePoint(std::string_view text, size_t* pos);
using rl::AppendUtf8;  // rl/core/utf8.h
// The byte offset of the first invalid sequence, or npos when text is valid UTF-8.
size_t FindInvalidUtf8(std::string_view text);
// What an encoder takes: DataError for text over 2 GiB or not valid UTF-8 (naming the byte).
Status CheckEncoderInput(std::string_view text);
// Invalid sequences become U+FFFD, one per maximal invalid subpart (Rust's from_utf8_lossy).
std::string Utf8Lossy(std::string_view bytes);

// Byte-level alphabet: each byte as the UTF-8 of its stand-in character ("Ġ" for ' ').
const std::string& ByteToUnicode(uint8_t byte);
// The byte a stand-in character stands for, or -1 when cp is not one.
int UnicodeToByte(char32_t cp);

// Rust's char::is_alphanumeric (Alphabetic or a numeric category) and char::is_whitespace
// (White_Space): what added tokens' single_word, lstrip and rstrip test.
bool IsAlphanumeric(char32_t cp);
bool IsWhitespace(char32_t cp);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// REQUIRES: text is valid UTF-8.
Result<std::string> Normalize(NormalForm form, std::string_view text);

}  // namespace rl::tokenizer
