#include "rl/model/tokenizer/unicode.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/bytestream.h>

#include <array>
#include <limits>
#include <vector>

namespace rl::tokenizer {
namespace {

// Length of the valid sequence starting at text[i], or 0 with *bad set to the length of the
// maximal invalid subpart (at least 1) as the Unicode standard and Rust define it.
size_t ValidSequenceAt(std::string_view text, size_t i, size_t* bad) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) need = 2;
  else if (c >= 0xE0 && c <= 0xEF) { need = 3; if (c == 0xE0) lo = 0xA0; if (c == 0xED) hi = 0x9F; }
  else if (c >= 0xF0 && c <= 0xF4) { need = 4; if (c == 0xF0) lo = 0x90; if (c == 0xF4) hi = 0x8F; }
  else { *bad = 1; return 0; }
  for (size_t k = 1; k < need; ++k) {
    const bool in = i + k < text.size() &&
                    (k == 1 ? b(i + k) >= lo && b(i + k) <= hi : b(i + k) >= 0x80 && b(i + k) <= 0xBF);
    if (!in) { *bad = k; return 0; }
  }
  return need;
}

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> to_byte{};  // stand-ins are all below U+0200
  ByteTables() {
    to_byte.fill(-1);
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + extra++);
      AppendUtf8(cp, &to_unicode[b]);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

char32_t NextCodePoint(std::string_view text, size_t* pos) {
  const auto b = [&](size_t k) { return static_cast<char32_t>(static_cast<uint8_t>(text[k])); };
  size_t i = *pos;
  const char32_t c = b(i);
  if (c < 0x80) { *pos = i + 1; return c; }
  if (c < 0xE0) { *pos = i + 2; return ((c & 0x1F) << 6) | (b(i + 1) & 0x3F); }
  if (c < 0xF0) {
    *pos = i + 3;
    return ((c & 0x0F) << 12) | ((b(i + 1) & 0x3F) << 6) | (b(i + 2) & 0x3F);
  }
  *pos = i + 4;
  return ((c & 0x07) << 18) | ((b(i + 1) & 0x3F) << 12) | ((b(i + 2) & 0x3F) << 6) | (b(i + 3) & 0x3F);
}

Status CheckEncoderInput(std::string_view text) {
  if (text.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return Status::DataError("tokenizer: text of " + std::to_string(text.size()) + " bytes is over 2 GiB");
  }
  const size_t bad = FindInvalidUtf8(text);
  if (bad != std::string_view::npos) {
    return Status::DataError("tokenizer: text is not valid UTF-8 at byte " + std::to_string(bad));
  }
  return Status::OK();
}

size_t FindInvalidUtf8(std::string_view text) {
  size_t i = 0, bad = 0;
  while (i < text.size()) {
    if (static_cast<uint8_t>(text[i]) < 0x80) { ++i; continue; }
    const size_t n = ValidSequenceAt(text, i, &bad);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0, bad = 0;
  while (i < bytes.size()) {
    const size_t n = ValidSequenceAt(bytes, i, &bad);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += bad;
    } else {
      out.append(bytes.data() + i, n);
      i += n;
    }
  }
  return out;
}

const std::string& ByteToUnicode(uint8_t byte) { return Tables().to_unicode[byte]; }

int UnicodeToByte(char32_t cp) { return cp < 512 ? Tables().to_byte[cp] : -1; }

bool IsAlphanumeric(char32_t cp) {
  const UChar32 c = static_cast<UChar32>(cp);
  if (u_hasBinaryProperty(c, UCHAR_ALPHABETIC)) return true;
  const int8_t type = u_charType(c);
  return type == U_DECIMAL_DIGIT_NUMBER || type == U_LETTER_NUMBER || type == U_OTHER_NUMBER;
}

bool IsWhitespace(char32_t cp) {
  return u_hasBinaryProperty(static_cast<UChar32>(cp), UCHAR_WHITE_SPACE);
}

Result<std::string> Normalize(NormalForm form, std::string_view text) {
  UErrorCode err = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  switch (form) {
    case NormalForm::kNfc: n = icu::Normalizer2::getNFCInstance(err); break;
    case NormalForm::kNfd: n = icu::Normalizer2::getNFDInstance(err); break;
    case NormalForm::kNfkc: n = icu::Normalizer2::getNFKCInstance(err); break;
    case NormalForm::kNfkd: n = icu::Normalizer2::getNFKDInstance(err); break;
  }
  if (U_FAILURE(err)) return Status::Internal(std::string("tokenizer: ICU normalizer: ") + u_errorName(err));
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (n->isNormalizedUTF8(piece, err) && U_SUCCESS(err)) return std::string(text);
  err = U_ZERO_ERROR;
  std::string out;
  icu::StringByteSink<std::string> sink(&out, static_cast<int32_t>(text.size()));
  n->normalizeUTF8(0, piece, sink, nullptr, err);
  if (U_FAILURE(err)) return Status::Internal(std::string("tokenizer: ICU normalizer: ") + u_errorName(err));
  return out;
}

}  // namespace rl::tokenizer
