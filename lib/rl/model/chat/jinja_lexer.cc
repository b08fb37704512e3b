#include "rl/model/chat/jinja_lexer.h"

#include <cctype>
#include <cstring>

#include "rl/model/chat/jinja_text.h"

namespace rl::chat::jinja {
namespace {

std::string NormalizeNewlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IsNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Python's str.rstrip() of the text before a "{%-" tag.
std::string RStripAll(const std::string& text) { return PyStrip(text, std::nullopt, false, true); }

class Lexer {
 public:
  explicit Lexer(const std::string& source) : s_(NormalizeNewlines(source)) {}

  Result<std::vector<Token>> Run() {
    while (pos_ < s_.size()) RL_RETURN_IF_ERROR(Step());
    tokens_.push_back({TokenType::kEof, "", LineAt(s_.size())});
    return std::move(tokens_);
  }

 private:
  int LineAt(size_t p) {
    for (; counted_ < p && counted_ < s_.size(); ++counted_)
      if (s_[counted_] == '\n') ++line_;
    return line_;
  }
  Status Fail(size_t p, const std::string& what) {
    return Status::DataError("line " + std::to_string(LineAt(p)) + ": " + what);
  }
  bool At(size_t p, const char* lit) const { return s_.compare(p, std::strlen(lit), lit) == 0; }
  size_t SkipWs(size_t p) const {
    while (p < s_.size() && IsWs(s_[p])) ++p;
    return p;
  }

  // The text before a tag, stripped as the tag's sign and lstrip_blocks say, then emitted.
  void EmitText(size_t begin, size_t end, char sign, bool block_like) {
    std::string text = s_.substr(begin, end - begin);
    if (sign == '-') {
      text = RStripAll(text);
    } else if (sign != '+' && block_like) {
      size_t l_pos = text.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if (l_pos > 0 || line_starting_) {
        bool all_ws = l_pos < text.size();
        for (size_t i = l_pos; i < text.size(); ++i)
          if (!IsWs(text[i]) || text[i] == '\n') all_ws = false;
        if (all_ws) text.resize(l_pos);
      }
    }
    if (!text.empty()) tokens_.push_back({TokenType::kData, std::move(text), LineAt(begin)});
  }

  // "{%(-|+|)\s*raw\s*(-%}\s*|%})" at the tag; *end is past it.
  bool MatchRaw(size_t after_sign, const char* word, size_t* end) const {
    size_t p = SkipWs(after_sign);
    size_t n = std::strlen(word);
    if (!At(p, word) || (p + n < s_.size() && IsNameChar(s_[p + n]))) return false;
    p = SkipWs(p + n);
    if (At(p, "-%}")) {
      *end = SkipWs(p + 3);
      return true;
    }
    if (At(p, "%}")) {
      *end = p + 2;
      return true;
    }
    return false;
  }

  Status Step() {
    size_t tag = pos_;
    char kind = 0;
    for (tag = s_.find('{', pos_); tag != std::string::npos; tag = s_.find('{', tag + 1)) {
      if (tag + 1 < s_.size() && std::strchr("{%#", s_[tag + 1]) != nullptr && s_[tag + 1] != '\0') {
        kind = s_[tag + 1];
        break;
      }
    }
    if (tag == std::string::npos) {
      tokens_.push_back({TokenType::kData, s_.substr(pos_), LineAt(pos_)});
      pos_ = s_.size();
      return Status::OK();
    }
    size_t after = tag + 2;
    char sign = 0;
    if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) sign = s_[after++];
    size_t raw_end = 0;
    if (kind == '%' && MatchRaw(after, "raw", &raw_end)) {
      EmitText(pos_, tag, sign, true);
      return Raw(tag, raw_end);
    }
    EmitText(pos_, tag, sign, kind != '{');
    if (kind == '#') return Comment(tag, after);
    return Tag(tag, after, kind == '%');
  }

  Status Raw(size_t tag, size_t body) {
    line_starting_ = s_[body - 1] == '\n';
    for (size_t p = s_.find("{%", body); p != std::string::npos; p = s_.find("{%", p + 1)) {
      size_t after = p + 2;
      char sign = 0;
      if (after < s_.size() && (s_[after] == '-' || s_[after] == '+')) sign = s_[after++];
      size_t q = SkipWs(after);
      if (!At(q, "endraw") || (q + 6 < s_.size() && IsNameChar(s_[q + 6]))) continue;
      q = SkipWs(q + 6);
      size_t end;
      if (At(q, "+%}")) {
        end = q + 3;
      } else if (At(q, "-%}")) {
        end = SkipWs(q + 3);
      } else if (At(q, "%}")) {
        end = q + 2 + (At(q + 2, "\n") ? 1 : 0);
      } else {
        continue;
      }
      EmitText(body, p, sign, true);
      pos_ = end;
      line_starting_ = s_[end - 1] == '\n';
      return Status::OK();
    }
    return Fail(tag, "missing end of raw directive");
  }

  Status Comment(size_t tag, size_t body) {
    size_t q = s_.find("#}", body);
    if (q == std::string::npos) return Fail(tag, "missing end of comment tag");
    size_t end;
    if (q > body && s_[q - 1] == '-') {
      end = SkipWs(q + 2);
    } else if (q > body && s_[q - 1] == '+') {
      end = q + 2;
    } else {
      end = q + 2 + (At(q + 2, "\n") ? 1 : 0);
    }
    pos_ = end;
    line_starting_ = s_[end - 1] == '\n';
    return Status::OK();
  }

  // Past the end delimiter of a tag at p, or npos when none starts there.
  size_t TagEnd(size_t p, bool block) const {
    if (block) {
      if (At(p, "+%}")) return p + 3;
      if (At(p, "-%}")) return SkipWs(p + 3);
      if (At(p, "%}")) return p + 2 + (At(p + 2, "\n") ? 1 : 0);
      return std::string::npos;
    }
    if (At(p, "-}}")) return SkipWs(p + 3);
    if (At(p, "}}")) return p + 2;
    return std::string::npos;
  }

  Status Tag(size_t tag, size_t p, bool block) {
    tokens_.push_back({block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", LineAt(tag)});
    std::string balance;
    while (true) {
      if (p >= s_.size())
        return Fail(tag, block ? "unexpected end of template: '{%' is never closed"
                               : "unexpected end of template: '{{' is never closed");
      if (balance.empty()) {
        size_t end = TagEnd(p, block);
        if (end != std::string::npos) {
          tokens_.push_back({block ? TokenType::kBlockEnd : TokenType::kVarEnd, "", LineAt(p)});
          pos_ = end;
          line_starting_ = s_[end - 1] == '\n';
          return Status::OK();
        }
      }
      if (IsWs(s_[p])) {
        ++p;
        continue;
      }
      RL_RETURN_IF_ERROR(ExprToken(&p, &balance));
    }
  }

  // (\d+_)*\d+ at p: the end, or p when there are no digits.
  size_t Digits(size_t p) const {
    size_t q = p;
    while (q < s_.size() && IsDigit(s_[q])) {
      ++q;
      if (q + 1 < s_.size() && s_[q] == '_' && IsDigit(s_[q + 1])) ++q;
    }
    return q;
  }

  static std::string NoUnderscores(std::string t) {
    std::string out;
    for (char c : t)
      if (c != '_') out.push_back(c);
    return out;
  }

  Status Number(size_t* pp) {
    size_t p = *pp, int_end = Digits(p), q = int_end;
    bool frac = false, expo = false;
    if (p == 0 || s_[p - 1] != '.') {
      if (q + 1 < s_.size() && s_[q] == '.' && IsDigit(s_[q + 1])) {
        frac = true;
        q = Digits(q + 1);
      }
      if (q < s_.size() && (s_[q] == 'e' || s_[q] == 'E')) {
        size_t e = q + 1;
        if (e < s_.size() && (s_[e] == '+' || s_[e] == '-')) ++e;
        if (e < s_.size() && IsDigit(s_[e])) {
          expo = true;
          q = Digits(e);
        }
      }
    }
    if (frac || expo) {
      tokens_.push_back({TokenType::kFloat, NoUnderscores(s_.substr(p, q - p)), LineAt(p)});
      *pp = q;
      return Status::OK();
    }
    if (s_[p] == '0' && p + 1 < s_.size() && std::strchr("xXoObB", s_[p + 1]) && s_[p + 1] != '\0') {
      q = p + 2;
      while (q < s_.size() && (std::isxdigit(static_cast<unsigned char>(s_[q])) || s_[q] == '_')) ++q;
    } else if (s_[p] == '0') {
      q = p + 1;
      while (q < s_.size() && (s_[q] == '0' || (s_[q] == '_' && q + 1 < s_.size() && s_[q + 1] == '0'))) ++q;
    } else {
      q = int_end;
    }
    tokens_.push_back({TokenType::kInteger, NoUnderscores(s_.substr(p, q - p)), LineAt(p)});
    *pp = q;
    return Status::OK();
  }

  Status String(size_t* pp) {
    size_t p = *pp;
    char quote = s_[p];
    size_t q = p + 1;
    while (q < s_.size() && s_[q] != quote) q += s_[q] == '\\' ? 2 : 1;
    if (q >= s_.size()) return Fail(p, "unterminated string literal");
    std::string raw = s_.substr(p + 1, q - p - 1), out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out.push_back(raw[i]);
        continue;
      }
      char c = raw[++i];
      const char* simple = std::strchr("\\'\"abfnrtv", c);
      if (c == '\n') continue;
      if (simple != nullptr && c != '\0') {
        static const char kOut[] = "\\'\"\a\b\f\n\r\t\v";
        out.push_back(kOut[simple - "\\'\"abfnrtv"]);
      } else if (c >= '0' && c <= '7') {
        int v = 0, n = 0;
        for (; n < 3 && i < raw.size() && raw[i] >= '0' && raw[i] <= '7'; ++n, ++i) v = v * 8 + (raw[i] - '0');
        --i;
        AppendUtf8(static_cast<char32_t>(v), &out);
      } else if (c == 'x' || c == 'u' || c == 'U') {
        size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
        if (i + n >= raw.size()) return Fail(p, "truncated \\" + std::string(1, c) + " escape");
        std::string hex = raw.substr(i + 1, n);
        for (char h : hex)
          if (!std::isxdigit(static_cast<unsigned char>(h))) return Fail(p, "truncated \\" + std::string(1, c) + " escape");
        unsigned long v = std::stoul(hex, nullptr, 16);
        if (v > 0x10ffff) return Fail(p, "illegal Unicode character in string literal");
        AppendUtf8(static_cast<char32_t>(v), &out);
        i += n;
      } else if (c == 'N') {
        return Fail(p, "\\N{...} escapes are not supported");
      } else {
        out.push_back('\\');
        out.push_back(c);
      }
    }
    tokens_.push_back({TokenType::kString, std::move(out), LineAt(p)});
    *pp = q + 1;
    return Status::OK();
  }

  Status ExprToken(size_t* pp, std::string* balance) {
    size_t p = *pp;
    char c = s_[p];
    if (IsDigit(c)) return Number(pp);
    if (IsNameStart(c)) {
      size_t q = p;
      while (q < s_.size() && IsNameChar(s_[q])) ++q;
      tokens_.push_back({TokenType::kName, s_.substr(p, q - p), LineAt(p)});
      *pp = q;
      return Status::OK();
    }
    if (c == '\'' || c == '"') return String(pp);
    static const char* kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : kTwo) {
      if (At(p, op)) {
        tokens_.push_back({TokenType::kOperator, op, LineAt(p)});
        *pp = p + 2;
        return Status::OK();
      }
    }
    if (std::strchr("+-/*%~[](){}><=.:|,;", c) == nullptr || c == '\0')
      return Fail(p, std::string("unexpected char '") + c + "'");
    if (c == '(' || c == '[' || c == '{') {
      balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) return Fail(p, std::string("unexpected '") + c + "'");
      if (balance->back() != c)
        return Fail(p, std::string("unexpected '") + c + "', expected '" + balance->back() + "'");
      balance->pop_back();
    }
    tokens_.push_back({TokenType::kOperator, std::string(1, c), LineAt(p)});
    *pp = p + 1;
    return Status::OK();
  }

  std::string s_;
  size_t pos_ = 0;
  size_t counted_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

Result<std::vector<Token>> Lex(const std::string& source) { return Lexer(source).Run(); }

}  // namespace rl::chat::jinja
