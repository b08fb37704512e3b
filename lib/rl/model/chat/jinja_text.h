// Python's string semantics over UTF-8, as Jinja templates see them through Python's str:
// code points (len, indexing, slicing), str.isspace, strip/split/splitlines/replace/title,
// float repr. Case mapping (upper, lower, title, capitalize) is ASCII only: other letters pass
// through unchanged, where Python would map them.
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/utf8.h"

namespace rl::chat::jinja {

// Decodes UTF-8 into code points; an invalid byte decodes as itself (U+0080..U+00FF), so a
// round trip through Encode never loses a valid string.
std::u32string DecodeUtf8(std::string_view s);
std::string EncodeUtf8(std::u32string_view s);
using rl::AppendUtf8;  // rl/core/utf8.h
size_t CodePointCount(std::string_view s);

bool PyIsSpace(char32_t c);
// str.strip/lstrip/rstrip: chars unset strips whitespace, else any code point in *chars.
std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right);
// str.split(sep, maxsplit) and str.rsplit; sep unset splits on runs of whitespace. An empty
// sep is the caller's error to report.
std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right);
std::vector<std::string> PySplitLines(std::string_view s, bool keepends);
// str.replace(old, new, count); count < 0 replaces all.
std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count);
std::string AsciiUpper(std::string_view s);
std::string AsciiLower(std::string_view s);
std::string PyTitle(std::string_view s);        // str.title()
std::string PyCapitalize(std::string_view s);   // str.capitalize()
std::string JinjaTitle(std::string_view s);     // Jinja's |title filter (splits on -, space, brackets)
// repr() of a str: quotes chosen as Python does, escapes for non-printable characters.
std::string PyReprString(std::string_view s);
// repr() of a float: the shortest digits that round-trip, "1.0", "1e+16", "1e-05", "nan", "inf".
std::string PyReprFloat(double d);

}  // namespace rl::chat::jinja
