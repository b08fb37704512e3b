#include "rl/task/math_answer.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "rl/task/rational.h"

namespace rl::task {
namespace {

constexpr int kMaxDepth = 32;  // nesting of \text{\text{...}} rewritten; deeper is kept as is

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool OneOf(std::string_view s, std::initializer_list<std::string_view> set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

// The index of the '}' closing the '{' at `open`, or npos; \{ and \} are not counted.
size_t MatchBrace(std::string_view s, size_t open) {
  int depth = 0;
  for (size_t k = open; k < s.size(); ++k) {
    if (s[k] == '\\') {
      ++k;
    } else if (s[k] == '{') {
      ++depth;
    } else if (s[k] == '}' && --depth == 0) {
      return k;
    }
  }
  return std::string_view::npos;
}

// For each '{' of s, the index of the '}' closing it (npos when none), as MatchBrace finds it:
// one pass, so that trying many boxes of a long response stays linear.
std::vector<size_t> ClosingBraces(std::string_view s) {
  std::vector<size_t> close(s.size(), std::string_view::npos), open;
  for (size_t k = 0; k < s.size(); ++k) {
    if (s[k] == '\\') {
      ++k;
    } else if (s[k] == '{') {
      open.push_back(k);
    } else if (s[k] == '}' && !open.empty()) {
      close[open.back()] = k;
      open.pop_back();
    }
  }
  return close;
}

// The argument of \boxed or \fbox whose name ends before `k`: a {group} or a token.
std::optional<std::string> BoxArgument(std::string_view s, size_t k, const std::vector<size_t>& closing) {
  if (k < s.size() && IsAlpha(s[k])) return std::nullopt;  // \boxedx is another command
  while (k < s.size() && IsSpace(s[k])) ++k;
  if (k < s.size() && s[k] == '{') {
    size_t close = closing[k];
    if (close == std::string_view::npos) return std::nullopt;
    return std::string(s.substr(k + 1, close - k - 1));
  }
  size_t end = k;
  while (end < s.size() && !IsSpace(s[end]) && s[end] != '$') ++end;
  if (end == k) return std::nullopt;
  return std::string(s.substr(k, end - k));
}

std::optional<std::string> GsmAnswer(std::string_view text) {
  size_t mark = text.rfind("####");
  if (mark == std::string_view::npos) return std::nullopt;
  std::string_view rest = text.substr(mark + 4);
  std::string_view line = Trim(rest.substr(0, rest.find('\n')));
  if (line.empty()) return std::nullopt;
  return std::string(line);
}

// The last number of the text by rule 3 of the header.
std::optional<std::string> LastNumber(std::string_view text) {
  size_t end = text.size();
  while (end > 0 && !IsDigit(text[end - 1])) --end;
  if (end == 0) return std::nullopt;
  auto digits_before = [&](size_t b) {
    while (b > 0 && IsDigit(text[b - 1])) --b;
    return b;
  };
  size_t b = digits_before(end);
  if (b >= 2 && text[b - 1] == '.' && IsDigit(text[b - 2])) b = digits_before(b - 1);
  auto digits_after = [&](size_t e) {
    while (e < text.size() && IsDigit(text[e])) ++e;
    return e;
  };
  // Thousands groups: the run at b has three digits and a comma and one to three digits before it.
  while (b >= 2 && text[b - 1] == ',' && IsDigit(text[b - 2]) && digits_after(b) - b == 3) {
    size_t prev = digits_before(b - 1);
    if (b - 1 - prev > 3) break;
    b = prev;
  }
  if (b >= 2 && text[b - 1] == '/' && IsDigit(text[b - 2]) && text.substr(b, end - b).find_first_of(".,") ==
                                                                   std::string_view::npos) {
    b = digits_before(b - 1);
  }
  if (b >= 1 && text[b - 1] == '-' && (b == 1 || !(IsAlpha(text[b - 2]) || IsDigit(text[b - 2])))) --b;
  return std::string(text.substr(b, end - b));
}

void ReplaceAll(std::string* s, std::string_view from, std::string_view to) {
  std::string out;
  size_t start = 0;
  for (size_t at = s->find(from); at != std::string::npos; at = s->find(from, start)) {
    out.append(*s, start, at - start);
    out += to;
    start = at + from.size();
  }
  if (start == 0) return;
  out.append(*s, start, std::string::npos);
  *s = std::move(out);
}

// One argument of \frac at *i: a {group}, a \command or one character.
std::string_view TakeArgument(std::string_view s, size_t* i) {
  while (*i < s.size() && IsSpace(s[*i])) ++*i;
  if (*i >= s.size()) return {};
  size_t start = *i;
  if (s[start] == '{') {
    size_t close = MatchBrace(s, start);
    if (close == std::string_view::npos) close = s.size();
    *i = std::min(close + 1, s.size());
    return s.substr(start + 1, close - start - 1);
  }
  if (s[start] == '\\') {
    size_t j = start + 1;
    while (j < s.size() && IsAlpha(s[j])) ++j;
    *i = std::max(j, std::min(start + 2, s.size()));
    return s.substr(start, *i - start);
  }
  *i = start + 1;
  return s.substr(start, 1);
}

std::string RewriteLatex(std::string_view s, int depth);

// The rewrite of the command \name whose name ends at *i, appended to *out.
void RewriteCommand(std::string_view s, std::string_view name, size_t* i, int depth, std::string* out) {
  if (OneOf(name, {"left", "right", "displaystyle", "textstyle", "quad", "qquad", "circ", "degree", "big",
                   "Big", "bigl", "bigr", "Bigl", "Bigr"})) {
    return;
  }
  if (OneOf(name, {"text", "textbf", "textit", "textrm", "textnormal", "mathrm", "mathbf", "mathit", "mbox",
                   "operatorname"})) {
    size_t k = *i;
    while (k < s.size() && IsSpace(s[k])) ++k;
    if (k >= s.size() || s[k] != '{') return;
    size_t close = MatchBrace(s, k);
    if (close == std::string_view::npos) close = s.size();
    *out += ' ';
    *out += RewriteLatex(s.substr(k + 1, close - k - 1), depth + 1);
    *i = std::min(close + 1, s.size());
    return;
  }
  if (OneOf(name, {"frac", "dfrac", "tfrac"})) {
    *out += "\\frac";
    for (int arg = 0; arg < 2; ++arg) *out += "{" + RewriteLatex(TakeArgument(s, i), depth + 1) + "}";
    return;
  }
  *out += '\\';
  *out += name;
}

std::string RewriteLatex(std::string_view s, int depth) {
  if (depth > kMaxDepth) return std::string(s);
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] != '\\') {
      out += s[i++];
      continue;
    }
    if (i + 1 >= s.size()) break;  // a lone backslash at the end
    char next = s[i + 1];
    if (!IsAlpha(next)) {  // a control symbol: spacing dropped, escapes unescaped
      i += 2;
      switch (next) {
        case '!': case ',': case ';': case ':': break;
        case ' ': case '$': case '%': case '{': case '}': out += next; break;
        default: out += '\\'; out += next;
      }
      continue;
    }
    size_t j = i + 1;
    while (j < s.size() && IsAlpha(s[j])) ++j;
    std::string_view name = s.substr(i + 1, j - i - 1);
    i = j;
    RewriteCommand(s, name, &i, depth, &out);
  }
  return out;
}

// "1,234,567.5" -> "1234567.5" when every group after the first has three digits.
std::string DropThousands(std::string_view s) {
  size_t comma = s.find(',');
  if (comma == std::string_view::npos) return std::string(s);
  size_t start = (s[0] == '-' || s[0] == '+') ? 1 : 0;
  size_t end = s.find('.');
  if (end == std::string_view::npos) end = s.size();
  if (comma - start < 1 || comma - start > 3) return std::string(s);
  for (size_t k = start; k < end; ++k) {
    bool is_comma_slot = k >= comma && (k - comma) % 4 == 0;
    if (is_comma_slot ? s[k] != ',' : !IsDigit(s[k])) return std::string(s);
  }
  if ((end - comma) % 4 != 0) return std::string(s);
  std::string out;
  for (char c : s) {
    if (c != ',') out += c;
  }
  return out;
}

bool IsNumber(std::string_view s) { return ParseRational(DropThousands(s)).has_value(); }

// A unit after a number: words of letters, with exponents ("cm^2", "m^{3}") and "/" between.
bool IsUnit(std::string_view s) {
  if (s.empty() || !IsAlpha(s.front())) return false;
  bool exponent = false;
  for (char c : s) {
    if (c == '^') {
      exponent = true;
    } else if (IsDigit(c)) {
      if (!exponent) return false;
    } else if (c != '{' && c != '}') {
      if (!IsAlpha(c) && !IsSpace(c) && c != '/' && c != '.') return false;
      exponent = false;
    }
  }
  return true;
}

// Splits "(a,b)" at its top-level commas; empty when s is not a bracketed list.
std::vector<std::string_view> TupleElements(std::string_view s) {
  if (s.size() < 3 || (s.front() != '(' && s.front() != '[') || (s.back() != ')' && s.back() != ']')) return {};
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 1;
  for (size_t k = 1; k + 1 < s.size(); ++k) {
    char c = s[k];
    if (c == '(' || c == '[' || c == '{') ++depth;
    if (c == ')' || c == ']' || c == '}') --depth;
    if (depth < 0) return {};
    if (c == ',' && depth == 0) {
      parts.push_back(s.substr(start, k - start));
      start = k + 1;
    }
  }
  if (parts.empty() || depth != 0) return {};
  parts.push_back(s.substr(start, s.size() - 1 - start));
  return parts;
}

// The canonical form of a string already rewritten and without white space.
std::string Canonical(std::string_view s, bool in_tuple) {
  for (int layer = 0; layer < kMaxDepth && s.size() >= 2 && s.front() == '{' && MatchBrace(s, 0) == s.size() - 1; ++layer) {
    s = s.substr(1, s.size() - 2);
  }
  if (auto r = ParseRational(in_tuple ? std::string(s) : DropThousands(s))) return CanonicalString(*r);
  if (!in_tuple) {
    std::vector<std::string_view> parts = TupleElements(s);
    if (!parts.empty()) {
      std::string out(1, s.front());
      for (size_t k = 0; k < parts.size(); ++k) out += (k ? "," : "") + Canonical(parts[k], true);
      return out + s.back();
    }
  }
  if (s.size() == 3 && s[0] == '(' && IsAlpha(s[1]) && s[2] == ')') return std::string(1, s[1]);
  return std::string(s);
}

}  // namespace

std::optional<std::string> LastBoxed(std::string_view text) {
  constexpr size_t kNone = std::string_view::npos;
  // Candidates from the end; each name is searched for only before the last one found, so that
  // a response of many unclosed boxes is read in linear time.
  auto before = [&](std::string_view name, size_t at) { return at == 0 ? kNone : text.rfind(name, at - 1); };
  size_t boxed = text.rfind("\\boxed"), fbox = text.rfind("\\fbox");
  std::vector<size_t> closing;
  while (boxed != kNone || fbox != kNone) {
    bool is_boxed = fbox == kNone || (boxed != kNone && boxed > fbox);
    size_t at = is_boxed ? boxed : fbox;
    if (closing.empty()) closing = ClosingBraces(text);
    if (auto arg = BoxArgument(text, at + (is_boxed ? 6 : 5), closing)) return arg;
    if (is_boxed) {
      boxed = before("\\boxed", at);
    } else {
      fbox = before("\\fbox", at);
    }
  }
  return std::nullopt;
}

std::optional<std::string> ExtractMathAnswer(std::string_view text) {
  if (auto boxed = LastBoxed(text)) return boxed;
  if (auto gsm = GsmAnswer(text)) return gsm;
  return LastNumber(text);
}

std::string NormalizeMathAnswer(std::string_view answer) {
  std::string s(answer);
  for (auto [from, to] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
           {"^{\\circ}", ""}, {"^\\circ", ""}, {"\xC2\xB0", ""}, {"\xE2\x88\x92", "-"}, {"{,}", ","}}) {
    ReplaceAll(&s, from, to);
  }
  s = RewriteLatex(s, 0);
  s.erase(std::remove_if(s.begin(), s.end(), [](char c) { return c == '$' || c == '%'; }), s.end());
  std::string_view t = Trim(s);
  while (!t.empty() && (t.back() == '.' || IsSpace(t.back()))) t.remove_suffix(1);
  if (t.size() >= 2 && IsAlpha(t[0])) {  // "x = 5" -> "5"
    std::string_view rest = Trim(t.substr(1));
    if (rest.size() > 1 && rest[0] == '=') t = Trim(rest.substr(1));
  }
  size_t space = t.find_first_of(" \t\n\r\f\v");
  if (space != std::string_view::npos && IsNumber(t.substr(0, space)) && IsUnit(Trim(t.substr(space)))) {
    t = t.substr(0, space);
  }
  std::string compact;
  for (char c : t) {
    if (!IsSpace(c)) compact += c;
  }
  return Canonical(compact, false);
}

std::string NormalizeReference(std::string_view reference) {
  bool worked = reference.find("\\boxed") != std::string_view::npos ||
                reference.find("\\fbox") != std::string_view::npos ||
                reference.find("####") != std::string_view::npos;
  if (worked) {
    if (auto answer = ExtractMathAnswer(reference)) return NormalizeMathAnswer(*answer);
  }
  return NormalizeMathAnswer(reference);
}

Result<double> MathReward(std::string_view response, std::string_view reference) {
  std::string want = NormalizeReference(reference);
  if (want.empty()) return Status::DataError("math verifier: the answer is empty");
  std::optional<std::string> got = ExtractMathAnswer(response);
  if (!got) return 0.0;
  return NormalizeMathAnswer(*got) == want ? 1.0 : 0.0;
}

}  // namespace rl::task
