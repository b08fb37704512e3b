#include "rl/env/calc.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <limits>

#include "rl/core/json_field.h"

namespace rl::env {
namespace {

constexpr int kMaxDepth = 200;  // parentheses and unary signs; recursion stays shallow

// Recursive descent that evaluates as it parses. An arithmetic error (overflow, division by
// zero) is kept and parsing goes on, so a syntax error anywhere is reported first.
class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<int64_t> Run() {
    int64_t v = Expr(0);
    Skip();
    if (syntax_.empty() && pos_ < s_.size()) Fail("unexpected " + What());
    if (!syntax_.empty()) return Status::DataError(syntax_);
    if (!arith_.empty()) return Status::DataError(arith_);
    return v;
  }

 private:
  void Skip() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  std::string What() const {
    if (pos_ >= s_.size()) return "end";
    unsigned char c = static_cast<unsigned char>(s_[pos_]);
    if (c >= 0x20 && c < 0x7f) return std::string("'") + static_cast<char>(c) + "'";
    char buf[16];
    std::snprintf(buf, sizeof(buf), "byte 0x%02x", c);
    return buf;
  }
  void Fail(const std::string& why) {
    if (!syntax_.empty()) return;
    std::string quoted(s_.substr(0, 60));
    if (s_.size() > 60) quoted += "...";
    syntax_ = "cannot parse '" + quoted + "': " + why + " at offset " + std::to_string(pos_);
  }
  void Arith(const char* what) {
    if (arith_.empty()) arith_ = what;
  }
  bool Eat(char c) {
    Skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  int64_t Expr(int depth) {
    int64_t v = Term(depth);
    while (syntax_.empty()) {
      if (Eat('+')) {
        int64_t r = Term(depth);
        if (__builtin_add_overflow(v, r, &v)) Arith("overflow");
      } else if (Eat('-')) {
        int64_t r = Term(depth);
        if (__builtin_sub_overflow(v, r, &v)) Arith("overflow");
      } else {
        break;
      }
    }
    return v;
  }

  int64_t Term(int depth) {
    int64_t v = Unary(depth);
    while (syntax_.empty()) {
      char op = 0;
      for (char c : {'*', '/', '%'}) {
        if (op == 0 && Eat(c)) op = c;
      }
      if (op == 0) break;
      int64_t r = Unary(depth);
      if (op == '*') {
        if (__builtin_mul_overflow(v, r, &v)) Arith("overflow");
      } else if (r == 0) {
        Arith("division by zero");
        v = 0;
      } else if (v == std::numeric_limits<int64_t>::min() && r == -1) {
        if (op == '/') Arith("overflow");  // the quotient does not fit; the remainder is 0
        v = 0;
      } else {
        v = op == '/' ? v / r : v % r;
      }
    }
    return v;
  }

  int64_t Unary(int depth) {
    if (depth > kMaxDepth) {
      Fail("nested deeper than " + std::to_string(kMaxDepth));
      return 0;
    }
    if (Eat('-')) {
      int64_t v = Unary(depth + 1);
      if (v == std::numeric_limits<int64_t>::min()) {
        Arith("overflow");
        return 0;
      }
      return -v;
    }
    if (Eat('+')) return Unary(depth + 1);
    return Primary(depth);
  }

  int64_t Primary(int depth) {
    Skip();
    if (Eat('(')) {
      int64_t v = Expr(depth + 1);
      if (!Eat(')')) Fail("expected ')' but found " + What());
      return v;
    }
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') {
      Fail("expected a number but found " + What());
      return 0;
    }
    int64_t v = 0;
    bool over = false;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      over = over || __builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[pos_] - '0', &v);
      ++pos_;
    }
    if (over) Arith("overflow");
    return over ? 0 : v;
  }

  std::string_view s_;
  size_t pos_ = 0;
  std::string syntax_, arith_;
};

std::string Dump(const nlohmann::json& j) { return JsonText(j); }

}  // namespace

Result<int64_t> EvalIntExpression(std::string_view text) { return Parser(text).Run(); }

std::string CalcReply(const std::string& request_line) {
  nlohmann::json req = nlohmann::json::parse(request_line, nullptr, false);
  if (req.is_discarded() || !req.is_object()) return Dump({{"error", "the request is not a JSON object"}});
  auto args = req.find("arguments");
  std::string expression;
  if (args != req.end() && args->is_string()) {
    expression = args->get<std::string>();
  } else if (args != req.end() && args->is_object() && args->contains("expression") &&
             (*args)["expression"].is_string()) {
    expression = (*args)["expression"].get<std::string>();
  } else {
    return Dump({{"error", "calc wants its arguments as a string or {\"expression\": string}"}});
  }
  Result<int64_t> v = EvalIntExpression(expression);
  if (!v.ok()) return Dump({{"error", v.status().message()}});
  return Dump({{"output", std::to_string(*v)}});
}

int RunCalcTool(std::istream& in, std::ostream& out) {
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out << CalcReply(line) << "\n";
    out.flush();
  }
  return 0;
}

}  // namespace rl::env
