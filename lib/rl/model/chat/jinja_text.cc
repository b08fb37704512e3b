#include "rl/model/chat/jinja_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace rl::chat::jinja {

std::u32string DecodeUtf8(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 0 : (c >> 5) == 6 ? 1 : (c >> 4) == 14 ? 2 : (c >> 3) == 30 ? 3 : -1;
    char32_t cp = n == 0 ? c : n == 1 ? (c & 0x1f) : n == 2 ? (c & 0x0f) : (c & 0x07);
    bool ok = n >= 0 && i + n < s.size();
    for (int k = 1; ok && k <= n; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) ok = false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (!ok) {
      out.push_back(c);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += n + 1;
  }
  return out;
}

std::string EncodeUtf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

size_t CodePointCount(std::string_view s) { return DecodeUtf8(s).size(); }

bool PyIsSpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
         c == 0x202f || c == 0x205f || c == 0x3000;
}

std::string PyStrip(std::string_view s, const std::optional<std::string>& chars, bool left,
                    bool right) {
  std::u32string u = DecodeUtf8(s);
  std::u32string set = chars ? DecodeUtf8(*chars) : std::u32string();
  auto strip = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : PyIsSpace(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip(u[b])) ++b;
  if (right)
    while (e > b && strip(u[e - 1])) --e;
  return EncodeUtf8(std::u32string_view(u).substr(b, e - b));
}

namespace {

std::vector<std::string> SplitWhitespace(std::string_view s, int64_t maxsplit, bool from_right) {
  std::u32string u = DecodeUtf8(s);
  std::vector<std::string> parts;
  if (!from_right) {
    size_t i = 0;
    while (true) {
      while (i < u.size() && PyIsSpace(u[i])) ++i;
      if (i == u.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(EncodeUtf8(std::u32string_view(u).substr(i)));
        break;
      }
      size_t j = i;
      while (j < u.size() && !PyIsSpace(u[j])) ++j;
      parts.push_back(EncodeUtf8(std::u32string_view(u).substr(i, j - i)));
      i = j;
    }
    return parts;
  }
  size_t e = u.size();
  while (true) {
    while (e > 0 && PyIsSpace(u[e - 1])) --e;
    if (e == 0) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      parts.push_back(EncodeUtf8(std::u32string_view(u).substr(0, e)));
      break;
    }
    size_t b = e;
    while (b > 0 && !PyIsSpace(u[b - 1])) --b;
    parts.push_back(EncodeUtf8(std::u32string_view(u).substr(b, e - b)));
    e = b;
  }
  return {parts.rbegin(), parts.rend()};
}

}  // namespace

std::vector<std::string> PySplit(std::string_view s, const std::optional<std::string>& sep,
                                 int64_t maxsplit, bool from_right) {
  if (!sep) return SplitWhitespace(s, maxsplit, from_right);
  std::vector<std::string> parts;
  const std::string& d = *sep;
  if (!from_right) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      size_t at = s.find(d, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + d.size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  size_t end = s.size();
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    if (end < d.size()) break;
    size_t at = s.rfind(d, end - d.size());
    if (at == std::string_view::npos) break;
    parts.emplace_back(s.substr(at + d.size(), end - at - d.size()));
    end = at;
  }
  parts.emplace_back(s.substr(0, end));
  return {parts.rbegin(), parts.rend()};
}

std::vector<std::string> PySplitLines(std::string_view s, bool keepends) {
  std::u32string u = DecodeUtf8(s);
  std::vector<std::string> lines;
  size_t start = 0, i = 0;
  while (i < u.size()) {
    char32_t c = u[i];
    bool br = c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d ||
              c == 0x1e || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!br) {
      ++i;
      continue;
    }
    size_t eol = i + 1;
    if (c == '\r' && eol < u.size() && u[eol] == '\n') ++eol;
    lines.push_back(EncodeUtf8(std::u32string_view(u).substr(start, (keepends ? eol : i) - start)));
    start = i = eol;
  }
  if (start < u.size()) lines.push_back(EncodeUtf8(std::u32string_view(u).substr(start)));
  return lines;
}

std::string PyReplace(std::string_view s, std::string_view old, std::string_view repl, int64_t count) {
  std::string out;
  if (old.empty()) {
    std::u32string u = DecodeUtf8(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(repl);
        ++done;
      }
      if (i < u.size()) AppendUtf8(u[i], &out);
    }
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t at = s.find(old, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(repl);
    start = at + old.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return out;
}

std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
  return out;
}

namespace {
bool IsAsciiAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char Up(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 32) : c; }
char Low(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
}  // namespace

std::string PyTitle(std::string_view s) {
  std::string out(s);
  bool prev_cased = false;
  for (char& c : out) {
    if (IsAsciiAlpha(c)) {
      c = prev_cased ? Low(c) : Up(c);
      prev_cased = true;
    } else {
      prev_cased = false;
    }
  }
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out = AsciiLower(s);
  if (!out.empty()) out[0] = Up(out[0]);
  return out;
}

std::string JinjaTitle(std::string_view s) {
  // re.split(r"([-\s({\[<]+)") keeps the separators; each piece: first char upper, rest lower.
  std::u32string u = DecodeUtf8(s);
  auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || PyIsSpace(c); };
  std::u32string out;
  size_t i = 0;
  while (i < u.size()) {
    size_t j = i;
    bool sep = is_sep(u[i]);
    while (j < u.size() && is_sep(u[j]) == sep) ++j;
    for (size_t k = i; k < j; ++k) {
      char32_t c = u[k];
      if (c < 0x80) c = static_cast<char32_t>(k == i ? Up(static_cast<char>(c)) : Low(static_cast<char>(c)));
      out.push_back(c);
    }
    i = j;
  }
  return EncodeUtf8(out);
}

namespace {

// Python's str.isprintable for a code point beyond ASCII, for the categories text meets:
// C0/C1 controls, separators other than the space, common format characters, surrogates and
// private use. Unassigned code points count as printable here.
bool PrintableNonAscii(char32_t c) {
  if (c <= 0xa0 || c == 0xad) return false;
  if (c == 0x1680 || (c >= 0x2000 && c <= 0x200f) || (c >= 0x2028 && c <= 0x202f)) return false;
  if ((c >= 0x205f && c <= 0x2064) || (c >= 0x2066 && c <= 0x206f) || c == 0x3000) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61c || c == 0x6dd || c == 0x70f || c == 0x180e) return false;
  if (c == 0xfeff || (c >= 0xfff9 && c <= 0xfffb)) return false;
  if ((c >= 0xd800 && c <= 0xf8ff) || c >= 0xf0000) return false;
  if (c == 0xe0001 || (c >= 0xe0020 && c <= 0xe007f)) return false;
  return c <= 0x10ffff;
}

}  // namespace

std::string PyReprString(std::string_view s) {
  std::u32string u = DecodeUtf8(s);
  bool has_single = u.find(U'\'') != std::u32string::npos;
  bool has_double = u.find(U'"') != std::u32string::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (char32_t c : u) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      out += buf;
    } else if (c < 0x7f || PrintableNonAscii(c)) {
      AppendUtf8(c, &out);
    } else {
      const char* fmt = c <= 0xff ? "\\x%02x" : c <= 0xffff ? "\\u%04x" : "\\U%08x";
      std::snprintf(buf, sizeof buf, fmt, static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string PyReprFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // [-]d[.ddd]e(+|-)XX
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits = sci.substr(0, 1) + (epos > 2 ? sci.substr(2, epos - 2) : "");
  int decpt = exp + 1;  // digits[0] is at 10^(decpt-1)
  std::string out;
  if (decpt <= -4 || decpt > 16) {
    out = digits.substr(0, 1);
    if (digits.size() > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    out += e;
  } else if (decpt <= 0) {
    out = "0." + std::string(-decpt, '0') + digits;
  } else if (static_cast<size_t>(decpt) >= digits.size()) {
    out = digits + std::string(decpt - digits.size(), '0') + ".0";
  } else {
    out = digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return sign + out;
}

}  // namespace rl::chat::jinja
