#include "rl/model/chat/jinja_parser.h"

#include "rl/model/chat/jinja_filters.h"
#include "rl/model/chat/jinja_parser_internal.h"

namespace rl::chat::jinja {
namespace internal {

std::string Describe(const Token& t) {
  switch (t.type) {
    case TokenType::kData: return "template data";
    case TokenType::kVarBegin: return "begin of print statement";
    case TokenType::kVarEnd: return "end of print statement";
    case TokenType::kBlockBegin: return "begin of statement block";
    case TokenType::kBlockEnd: return "end of statement block";
    case TokenType::kEof: return "end of template";
    case TokenType::kString: return "string";
    default: return t.value;
  }
}

// ---- statements (expressions: jinja_parser_expr.cc) ----

// Parses until a block tag named in `ends` (left current, after its "{%") or the end.
Result<Body> Parser::ParseBody(const Names& ends, std::string* end, const std::string& opener, int opener_line) {
  RL_RETURN_IF_ERROR(Deeper());
  Body body;
  while (true) {
    const Token& tok = Cur();
    if (tok.type == TokenType::kEof) {
      if (ends.empty()) break;
      return Fail("unexpected end of template: '" + opener + "' from line " + std::to_string(opener_line) +
                  " is never closed (expected '" + *ends.rbegin() + "')");
    }
    if (tok.type == TokenType::kData) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kText;
      s->line = tok.line;
      s->text = tok.value;
      body.push_back(std::move(s));
      Next();
    } else if (tok.type == TokenType::kVarBegin) {
      int line = tok.line;
      Next();
      RL_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, {}, false));
      if (Cur().type != TokenType::kVarEnd) return Fail("expected end of print statement, got '" + Describe(Cur()) + "'");
      Next();
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kPrint;
      s->line = line;
      s->expr = std::move(e);
      body.push_back(std::move(s));
    } else if (tok.type == TokenType::kBlockBegin) {
      Next();
      if (Cur().type == TokenType::kName && ends.count(Cur().value)) {
        *end = Cur().value;
        --depth_;
        return body;
      }
      RL_ASSIGN_OR_RETURN(StmtPtr s, ParseStatement());
      if (s) body.push_back(std::move(s));
    } else {
      return Unexpected();
    }
  }
  --depth_;
  return body;
}

Result<StmtPtr> Parser::ParseStatement() {
  if (Cur().type != TokenType::kName) return Fail("tag name expected");
  std::string tag = Cur().value;
  int line = Cur().line;
  Next();
  auto s = std::make_unique<Stmt>();
  s->line = line;
  if (tag == "if") RL_RETURN_IF_ERROR(ParseIf(s.get()));
  else if (tag == "for") RL_RETURN_IF_ERROR(ParseFor(s.get()));
  else if (tag == "set") RL_RETURN_IF_ERROR(ParseSet(s.get()));
  else if (tag == "macro") RL_RETURN_IF_ERROR(ParseMacro(s.get()));
  else if (tag == "call") RL_RETURN_IF_ERROR(ParseCallBlock(s.get()));
  else if (tag == "filter") RL_RETURN_IF_ERROR(ParseFilterBlock(s.get()));
  else if (tag == "with") RL_RETURN_IF_ERROR(ParseWith(s.get()));
  else if (tag == "generation") RL_RETURN_IF_ERROR(ParseGeneration(s.get()));
  else if (tag == "break" || tag == "continue") {
    if (loops_ == 0) return Status::DataError("line " + std::to_string(line) + ": '" + tag + "' outside of a loop");
    s->kind = tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    RL_RETURN_IF_ERROR(ExpectBlockEnd());
  } else {
    return Status::DataError("line " + std::to_string(line) + ": encountered unknown tag '" + tag + "'");
  }
  return s;
}

// After ParseBody found `end`: consumes the end tag's name and its "%}".
Status Parser::CloseTag() {
  Next();
  return ExpectBlockEnd();
}

Status Parser::ParseIf(Stmt* s) {
  s->kind = Stmt::Kind::kIf;
  while (true) {
    RL_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(false, {}, false));
    RL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    RL_ASSIGN_OR_RETURN(Body body, ParseBody({"elif", "else", "endif"}, &end, "if", s->line));
    s->conds.push_back(std::move(cond));
    s->bodies.push_back(std::move(body));
    if (end == "elif") {
      Next();
      continue;
    }
    if (end == "else") {
      RL_RETURN_IF_ERROR(CloseTag());
      RL_ASSIGN_OR_RETURN(s->else_body, ParseBody({"endif"}, &end, "if", s->line));
    }
    return CloseTag();
  }
}

// Names separated by commas, optionally in parentheses: for and set targets.
Result<std::vector<std::string>> Parser::ParseTargets() {
  bool paren = SkipOp("(");
  std::vector<std::string> names;
  do {
    if (paren && IsOp(")")) break;
    RL_ASSIGN_OR_RETURN(std::string n, ExpectName());
    names.push_back(n);
  } while (SkipOp(","));
  if (paren) RL_RETURN_IF_ERROR(ExpectOp(")"));
  if (names.empty()) return Fail("expected a name");
  return names;
}

Status Parser::ParseFor(Stmt* s) {
  s->kind = Stmt::Kind::kFor;
  RL_ASSIGN_OR_RETURN(s->targets, ParseTargets());
  if (!SkipName("in")) return Fail("expected 'in', got '" + Describe(Cur()) + "'");
  RL_ASSIGN_OR_RETURN(s->expr, ParseTuple(false, {"recursive"}, false));
  if (SkipName("if")) {
    RL_ASSIGN_OR_RETURN(s->cond, ParseExpression(true));
  }
  if (IsName("recursive")) return Fail("recursive loops are not supported");
  RL_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  ++loops_;
  auto body = ParseBody({"endfor", "else"}, &end, "for", s->line);
  --loops_;
  if (!body.ok()) return body.status();
  s->body = std::move(body).value();
  if (end == "else") {
    RL_RETURN_IF_ERROR(CloseTag());
    int saved = loops_;
    loops_ = 0;  // the else block runs outside the loop
    auto eb = ParseBody({"endfor"}, &end, "for", s->line);
    loops_ = saved;
    if (!eb.ok()) return eb.status();
    s->else_body = std::move(eb).value();
  }
  return CloseTag();
}

Status Parser::ParseSet(Stmt* s) {
  if (Cur().type == TokenType::kName && Peek().type == TokenType::kOperator && Peek().value == "." &&
      Peek(2).type == TokenType::kName) {
    s->targets.push_back(Cur().value);
    s->name = Peek(2).value;
    Next(), Next(), Next();
  } else {
    RL_ASSIGN_OR_RETURN(s->targets, ParseTargets());
  }
  if (SkipOp("=")) {
    s->kind = Stmt::Kind::kSet;
    RL_ASSIGN_OR_RETURN(s->expr, ParseTuple(true, {}, false));
    return ExpectBlockEnd();
  }
  if (!s->name.empty()) return Fail("expected '='");
  s->kind = Stmt::Kind::kSetBlock;
  if (IsOp("|")) {
    RL_ASSIGN_OR_RETURN(s->expr, ParseFilters(nullptr, false));
  }
  RL_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  RL_ASSIGN_OR_RETURN(s->body, ParseBody({"endset"}, &end, "set", s->line));
  return CloseTag();
}

Status Parser::ParseSignature(Stmt* s) {
  RL_RETURN_IF_ERROR(ExpectOp("("));
  while (!IsOp(")")) {
    if (!s->params.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
    if (IsOp(")")) break;
    RL_ASSIGN_OR_RETURN(std::string n, ExpectName());
    ExprPtr def;
    if (SkipOp("=")) {
      RL_ASSIGN_OR_RETURN(def, ParseExpression(true));
    } else if (!s->defaults.empty() && s->defaults.back()) {
      return Fail("non-default argument follows default argument");
    }
    s->params.push_back(n);
    s->defaults.push_back(std::move(def));
  }
  Next();
  return Status::OK();
}

Status Parser::ParseMacro(Stmt* s) {
  s->kind = Stmt::Kind::kMacro;
  RL_ASSIGN_OR_RETURN(s->name, ExpectName());
  RL_RETURN_IF_ERROR(ParseSignature(s));
  RL_RETURN_IF_ERROR(ExpectBlockEnd());
  int saved = loops_;
  loops_ = 0;
  std::string end;
  auto body = ParseBody({"endmacro"}, &end, "macro", s->line);
  loops_ = saved;
  if (!body.ok()) return body.status();
  s->body = std::move(body).value();
  return CloseTag();
}

Status Parser::ParseCallBlock(Stmt* s) {
  s->kind = Stmt::Kind::kCallBlock;
  if (IsOp("(")) RL_RETURN_IF_ERROR(ParseSignature(s));
  RL_ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
  if (s->expr->kind != Expr::Kind::kCall) return Fail("expected call");
  RL_RETURN_IF_ERROR(ExpectBlockEnd());
  int saved = loops_;
  loops_ = 0;
  std::string end;
  auto body = ParseBody({"endcall"}, &end, "call", s->line);
  loops_ = saved;
  if (!body.ok()) return body.status();
  s->body = std::move(body).value();
  return CloseTag();
}

Status Parser::ParseFilterBlock(Stmt* s) {
  s->kind = Stmt::Kind::kFilterBlock;
  RL_ASSIGN_OR_RETURN(s->expr, ParseFilters(nullptr, true));
  RL_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  RL_ASSIGN_OR_RETURN(s->body, ParseBody({"endfilter"}, &end, "filter", s->line));
  return CloseTag();
}

Status Parser::ParseWith(Stmt* s) {
  s->kind = Stmt::Kind::kWith;
  while (Cur().type != TokenType::kBlockEnd) {
    if (!s->targets.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
    RL_ASSIGN_OR_RETURN(std::string n, ExpectName());
    RL_RETURN_IF_ERROR(ExpectOp("="));
    RL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
    s->targets.push_back(n);
    s->defaults.push_back(std::move(v));
  }
  RL_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  RL_ASSIGN_OR_RETURN(s->body, ParseBody({"endwith"}, &end, "with", s->line));
  return CloseTag();
}

Status Parser::ParseGeneration(Stmt* s) {
  s->kind = Stmt::Kind::kWith;  // a scope that renders its body
  RL_RETURN_IF_ERROR(ExpectBlockEnd());
  std::string end;
  RL_ASSIGN_OR_RETURN(s->body, ParseBody({"endgeneration"}, &end, "generation", s->line));
  return CloseTag();
}

// Unknown filters and tests are errors when the template is compiled, as in Jinja, except
// inside an if statement or an inline if (a "soft" frame in Jinja's compiler), where they fail
// only when evaluated. Loops, macros, call, filter, set and with blocks start a frame that is not
// soft again.
Status CheckNames(const Expr* e, bool soft) {
  if (!e) return Status::OK();
  if (e->kind == Expr::Kind::kCondExpr) soft = true;
  if (!soft && e->kind == Expr::Kind::kFilter && !IsKnownFilter(e->name))
    return Status::DataError("line " + std::to_string(e->line) + ": no filter named '" + e->name + "'");
  if (!soft && e->kind == Expr::Kind::kTest && !IsKnownTest(e->name))
    return Status::DataError("line " + std::to_string(e->line) + ": no test named '" + e->name + "'");
  for (const Expr* c : {e->a.get(), e->b.get(), e->c.get()}) RL_RETURN_IF_ERROR(CheckNames(c, soft));
  for (const auto& c : e->args) RL_RETURN_IF_ERROR(CheckNames(c.get(), soft));
  for (const auto& [k, c] : e->kwargs) RL_RETURN_IF_ERROR(CheckNames(c.get(), soft));
  return Status::OK();
}

Status CheckNames(const Body& body, bool soft) {
  for (const auto& s : body) {
    bool inner = s->kind != Stmt::Kind::kIf && s->kind != Stmt::Kind::kPrint && s->kind != Stmt::Kind::kSet;
    bool here = s->kind == Stmt::Kind::kIf ? true : soft;  // where the statement's own expressions live
    bool body_soft = s->kind == Stmt::Kind::kIf ? true : inner ? false : soft;
    RL_RETURN_IF_ERROR(CheckNames(s->expr.get(), s->kind == Stmt::Kind::kFor || s->kind == Stmt::Kind::kSet ||
                                                     s->kind == Stmt::Kind::kPrint || s->kind == Stmt::Kind::kCallBlock
                                                 ? here
                                                 : body_soft));
    RL_RETURN_IF_ERROR(CheckNames(s->cond.get(), body_soft));
    for (const auto& c : s->conds) RL_RETURN_IF_ERROR(CheckNames(c.get(), here));
    for (const auto& d : s->defaults) RL_RETURN_IF_ERROR(CheckNames(d.get(), s->kind == Stmt::Kind::kWith ? here : body_soft));
    for (const auto& b : s->bodies) RL_RETURN_IF_ERROR(CheckNames(b, body_soft));
    RL_RETURN_IF_ERROR(CheckNames(s->body, body_soft));
    RL_RETURN_IF_ERROR(CheckNames(s->else_body, body_soft));
  }
  return Status::OK();
}

}  // namespace internal

Result<std::shared_ptr<const Template>> Parse(const std::string& source) {
  RL_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  RL_ASSIGN_OR_RETURN(auto tpl, internal::Parser(std::move(tokens)).Run());
  RL_RETURN_IF_ERROR(internal::CheckNames(tpl->body, false));
  return tpl;
}

}  // namespace rl::chat::jinja
