// Internal to the parser (jinja_parser.cc: statements; jinja_parser_expr.cc: expressions):
// a recursive-descent parser over the lexer's tokens, one per Parse call.
// Thread safety: one thread per Parser.
#pragma once

#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/chat/jinja_ast.h"
#include "rl/model/chat/jinja_lexer.h"
#include "rl/model/chat/jinja_parser.h"

namespace rl::chat::jinja::internal {

using Names = std::set<std::string>;

std::string Describe(const Token& t);

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Result<std::shared_ptr<const Template>> Run() {
    auto tpl = std::make_shared<Template>();
    std::string end;
    RL_ASSIGN_OR_RETURN(tpl->body, ParseBody({}, &end, "", 0));
    return std::shared_ptr<const Template>(std::move(tpl));
  }

 private:
  const Token& Cur() const { return t_[i_]; }
  const Token& Peek(size_t n = 1) const { return t_[std::min(i_ + n, t_.size() - 1)]; }
  void Next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool IsOp(const char* op) const { return Cur().type == TokenType::kOperator && Cur().value == op; }
  bool IsName(const char* n) const { return Cur().type == TokenType::kName && Cur().value == n; }
  bool SkipOp(const char* op) {
    if (!IsOp(op)) return false;
    Next();
    return true;
  }
  bool SkipName(const char* n) {
    if (!IsName(n)) return false;
    Next();
    return true;
  }
  Status Fail(const std::string& what) const {
    return Status::DataError("line " + std::to_string(Cur().line) + ": " + what);
  }
  Status Unexpected() const { return Fail("unexpected '" + Describe(Cur()) + "'"); }
  Status ExpectOp(const char* op) {
    if (SkipOp(op)) return Status::OK();
    return Fail(std::string("expected '") + op + "', got '" + Describe(Cur()) + "'");
  }
  Result<std::string> ExpectName() {
    if (Cur().type != TokenType::kName) return Fail("expected a name, got '" + Describe(Cur()) + "'");
    std::string n = Cur().value;
    Next();
    return n;
  }
  Status ExpectBlockEnd() {
    if (Cur().type == TokenType::kBlockEnd) {
      Next();
      return Status::OK();
    }
    return Fail("expected end of statement block, got '" + Describe(Cur()) + "'");
  }
  Status Deeper() {
    if (++depth_ > kMaxParseDepth) return Fail("template nested too deeply");
    return Status::OK();
  }
  ExprPtr Node(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  // ---- statements ----

  // Parses until a block tag named in `ends` (left current, after its "{%") or the end.
  Result<Body> ParseBody(const Names& ends, std::string* end, const std::string& opener, int opener_line);

  Result<StmtPtr> ParseStatement();

  // After ParseBody found `end`: consumes the end tag's name and its "%}".
  Status CloseTag();

  Status ParseIf(Stmt* s);

  // Names separated by commas, optionally in parentheses: for and set targets.
  Result<std::vector<std::string>> ParseTargets();

  Status ParseFor(Stmt* s);

  Status ParseSet(Stmt* s);

  Status ParseSignature(Stmt* s);

  Status ParseMacro(Stmt* s);

  Status ParseCallBlock(Stmt* s);

  Status ParseFilterBlock(Stmt* s);

  Status ParseWith(Stmt* s);

  Status ParseGeneration(Stmt* s);

  // ---- expressions ----

  bool IsTupleEnd(const Names& extra) const;

  Result<ExprPtr> ParseTuple(bool with_condexpr, const Names& extra, bool explicit_parens);

  Result<ExprPtr> ParseExpression(bool with_condexpr);

  Result<ExprPtr> ParseCondExpr();

  Result<ExprPtr> ParseBinaryChain(Result<ExprPtr> (Parser::*sub)(), std::initializer_list<const char*> ops,
                                   bool names);

  Result<ExprPtr> ParseOr() { return ParseBinaryChain(&Parser::ParseAnd, {"or"}, true); }
  Result<ExprPtr> ParseAnd() { return ParseBinaryChain(&Parser::ParseNot, {"and"}, true); }
  Result<ExprPtr> ParseNot();

  Result<ExprPtr> ParseCompare();

  Result<ExprPtr> ParseMath1() { return ParseBinaryChain(&Parser::ParseConcat, {"+", "-"}, false); }
  Result<ExprPtr> ParseConcat() { return ParseBinaryChain(&Parser::ParseMath2, {"~"}, false); }
  Result<ExprPtr> ParseMath2() { return ParseBinaryChain(&Parser::ParsePow, {"*", "/", "//", "%"}, false); }
  Result<ExprPtr> ParsePow() { return ParseBinaryChain(&Parser::ParseUnaryFiltered, {"**"}, false); }
  Result<ExprPtr> ParseUnaryFiltered() { return ParseUnary(true); }

  Result<ExprPtr> ParseUnary(bool with_filter);

  Result<ExprPtr> ParsePrimary();

  Result<ExprPtr> ParseNumber();

  Result<ExprPtr> ParseList();

  Result<ExprPtr> ParseDict();

  Result<ExprPtr> ParsePostfix(ExprPtr e);

  Result<ExprPtr> ParseFilterExpr(ExprPtr e);

  Result<ExprPtr> ParseSubscript(ExprPtr obj);

  Status ParseCallArgs(Expr* e);

  Result<ExprPtr> ParseCall(ExprPtr fn);

  Result<std::string> DottedName();

  // `| f(args) | g ...`; with start_inline the first filter has no leading pipe.
  Result<ExprPtr> ParseFilters(ExprPtr e, bool start_inline);

  Result<ExprPtr> ParseTest(ExprPtr e);

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace rl::chat::jinja::internal
