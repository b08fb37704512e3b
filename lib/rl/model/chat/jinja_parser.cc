#include "rl/model/chat/jinja_parser.h"

#include <set>
#include <vector>

#include "rl/model/chat/jinja_filters.h"
#include "rl/model/chat/jinja_lexer.h"

namespace rl::chat::jinja {
namespace {

using Names = std::set<std::string>;

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
  Result<Body> ParseBody(const Names& ends, std::string* end, const std::string& opener, int opener_line) {
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

  Result<StmtPtr> ParseStatement() {
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
  Status CloseTag() {
    Next();
    return ExpectBlockEnd();
  }

  Status ParseIf(Stmt* s) {
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
  Result<std::vector<std::string>> ParseTargets() {
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

  Status ParseFor(Stmt* s) {
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

  Status ParseSet(Stmt* s) {
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

  Status ParseSignature(Stmt* s) {
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

  Status ParseMacro(Stmt* s) {
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

  Status ParseCallBlock(Stmt* s) {
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

  Status ParseFilterBlock(Stmt* s) {
    s->kind = Stmt::Kind::kFilterBlock;
    RL_ASSIGN_OR_RETURN(s->expr, ParseFilters(nullptr, true));
    RL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    RL_ASSIGN_OR_RETURN(s->body, ParseBody({"endfilter"}, &end, "filter", s->line));
    return CloseTag();
  }

  Status ParseWith(Stmt* s) {
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

  Status ParseGeneration(Stmt* s) {
    s->kind = Stmt::Kind::kWith;  // a scope that renders its body
    RL_RETURN_IF_ERROR(ExpectBlockEnd());
    std::string end;
    RL_ASSIGN_OR_RETURN(s->body, ParseBody({"endgeneration"}, &end, "generation", s->line));
    return CloseTag();
  }

  // ---- expressions ----

  bool IsTupleEnd(const Names& extra) const {
    const Token& c = Cur();
    if (c.type == TokenType::kVarEnd || c.type == TokenType::kBlockEnd || c.type == TokenType::kEof) return true;
    if (c.type == TokenType::kOperator && c.value == ")") return true;
    return c.type == TokenType::kName && extra.count(c.value);
  }

  Result<ExprPtr> ParseTuple(bool with_condexpr, const Names& extra, bool explicit_parens) {
    int line = Cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
      if (IsTupleEnd(extra)) break;
      RL_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
      items.push_back(std::move(e));
      if (IsOp(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) return Fail("expected an expression, got '" + Describe(Cur()) + "'");
    }
    ExprPtr t = Node(Expr::Kind::kList, line);
    t->args = std::move(items);
    return t;
  }

  Result<ExprPtr> ParseExpression(bool with_condexpr) {
    RL_RETURN_IF_ERROR(Deeper());
    auto r = with_condexpr ? ParseCondExpr() : ParseOr();
    --depth_;
    return r;
  }

  Result<ExprPtr> ParseCondExpr() {
    int line = Cur().line;
    RL_ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
    while (SkipName("if")) {
      ExprPtr n = Node(Expr::Kind::kCondExpr, line);
      RL_ASSIGN_OR_RETURN(n->a, ParseOr());
      n->b = std::move(e);
      if (SkipName("else")) {
        RL_ASSIGN_OR_RETURN(n->c, ParseCondExpr());
      }
      e = std::move(n);
    }
    return e;
  }

  Result<ExprPtr> ParseBinaryChain(Result<ExprPtr> (Parser::*sub)(), std::vector<const char*> ops,
                                   bool names) {
    int line = Cur().line;
    RL_ASSIGN_OR_RETURN(ExprPtr e, (this->*sub)());
    while (true) {
      const char* hit = nullptr;
      for (const char* op : ops)
        if (names ? IsName(op) : IsOp(op)) hit = op;
      if (!hit) return e;
      Next();
      ExprPtr n = Node(Expr::Kind::kBinary, line);
      n->name = hit;
      n->a = std::move(e);
      RL_ASSIGN_OR_RETURN(n->b, (this->*sub)());
      e = std::move(n);
    }
  }

  Result<ExprPtr> ParseOr() { return ParseBinaryChain(&Parser::ParseAnd, {"or"}, true); }
  Result<ExprPtr> ParseAnd() { return ParseBinaryChain(&Parser::ParseNot, {"and"}, true); }
  Result<ExprPtr> ParseNot() {
    if (IsName("not")) {
      int line = Cur().line;
      Next();
      RL_RETURN_IF_ERROR(Deeper());
      ExprPtr n = Node(Expr::Kind::kNot, line);
      RL_ASSIGN_OR_RETURN(n->a, ParseNot());
      --depth_;
      return n;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    int line = Cur().line;
    RL_ASSIGN_OR_RETURN(ExprPtr e, ParseMath1());
    ExprPtr n = Node(Expr::Kind::kCompare, line);
    while (true) {
      std::string op;
      if (Cur().type == TokenType::kOperator &&
          (IsOp("==") || IsOp("!=") || IsOp("<") || IsOp("<=") || IsOp(">") || IsOp(">="))) {
        op = Cur().value;
        Next();
      } else if (SkipName("in")) {
        op = "in";
      } else if (IsName("not") && Peek().type == TokenType::kName && Peek().value == "in") {
        Next(), Next();
        op = "notin";
      } else {
        break;
      }
      RL_ASSIGN_OR_RETURN(ExprPtr rhs, ParseMath1());
      n->ops.push_back(op);
      n->args.push_back(std::move(rhs));
    }
    if (n->ops.empty()) return e;
    n->a = std::move(e);
    return n;
  }

  Result<ExprPtr> ParseMath1() { return ParseBinaryChain(&Parser::ParseConcat, {"+", "-"}, false); }
  Result<ExprPtr> ParseConcat() { return ParseBinaryChain(&Parser::ParseMath2, {"~"}, false); }
  Result<ExprPtr> ParseMath2() { return ParseBinaryChain(&Parser::ParsePow, {"*", "/", "//", "%"}, false); }
  Result<ExprPtr> ParsePow() { return ParseBinaryChain(&Parser::ParseUnaryFiltered, {"**"}, false); }
  Result<ExprPtr> ParseUnaryFiltered() { return ParseUnary(true); }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    RL_RETURN_IF_ERROR(Deeper());
    int line = Cur().line;
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      e = Node(IsOp("-") ? Expr::Kind::kNeg : Expr::Kind::kPos, line);
      Next();
      RL_ASSIGN_OR_RETURN(e->a, ParseUnary(false));
    } else {
      RL_ASSIGN_OR_RETURN(e, ParsePrimary());
    }
    RL_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
    if (with_filter) {
      RL_ASSIGN_OR_RETURN(e, ParseFilterExpr(std::move(e)));
    }
    --depth_;
    return e;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& tok = Cur();
    int line = tok.line;
    if (tok.type == TokenType::kName) {
      ExprPtr e = Node(Expr::Kind::kConst, line);
      const std::string& v = tok.value;
      if (v == "true" || v == "True") e->value = true;
      else if (v == "false" || v == "False") e->value = false;
      else if (v == "none" || v == "None") e->value = nullptr;
      else {
        e->kind = Expr::Kind::kName;
        e->name = v;
      }
      Next();
      return e;
    }
    if (tok.type == TokenType::kString) {
      std::string s;
      while (Cur().type == TokenType::kString) {
        s += Cur().value;
        Next();
      }
      ExprPtr e = Node(Expr::Kind::kConst, line);
      e->value = s;
      return e;
    }
    if (tok.type == TokenType::kInteger || tok.type == TokenType::kFloat) return ParseNumber();
    if (IsOp("(")) {
      Next();
      RL_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple(true, {}, true));
      RL_RETURN_IF_ERROR(ExpectOp(")"));
      return e;
    }
    if (IsOp("[")) return ParseList();
    if (IsOp("{")) return ParseDict();
    return Unexpected();
  }

  Result<ExprPtr> ParseNumber() {
    const Token& tok = Cur();
    ExprPtr e = Node(Expr::Kind::kConst, tok.line);
    try {
      if (tok.type == TokenType::kFloat) {
        e->value = std::stod(tok.value);
      } else {
        std::string v = tok.value;
        int base = 10;
        if (v.size() > 1 && v[0] == '0' && std::strchr("xXoObB", v[1])) {
          base = (v[1] == 'x' || v[1] == 'X') ? 16 : (v[1] == 'o' || v[1] == 'O') ? 8 : 2;
          v = v.substr(2);
        }
        e->value = static_cast<int64_t>(std::stoll(v, nullptr, base));
      }
    } catch (const std::exception&) {
      return Fail("number out of range: " + tok.value);
    }
    Next();
    return e;
  }

  Result<ExprPtr> ParseList() {
    ExprPtr e = Node(Expr::Kind::kList, Cur().line);
    Next();
    while (!IsOp("]")) {
      if (!e->args.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("]")) break;
      RL_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
      e->args.push_back(std::move(item));
    }
    Next();
    return e;
  }

  Result<ExprPtr> ParseDict() {
    ExprPtr e = Node(Expr::Kind::kDict, Cur().line);
    Next();
    while (!IsOp("}")) {
      if (!e->args.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp("}")) break;
      RL_ASSIGN_OR_RETURN(ExprPtr k, ParseExpression(true));
      RL_RETURN_IF_ERROR(ExpectOp(":"));
      RL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
      e->args.push_back(std::move(k));
      e->args.push_back(std::move(v));
    }
    Next();
    return e;
  }

  Result<ExprPtr> ParsePostfix(ExprPtr e) {
    while (true) {
      if (IsOp(".") || IsOp("[")) {
        RL_ASSIGN_OR_RETURN(e, ParseSubscript(std::move(e)));
      } else if (IsOp("(")) {
        RL_ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        RL_ASSIGN_OR_RETURN(e, ParseFilters(std::move(e), false));
      } else if (IsName("is")) {
        RL_ASSIGN_OR_RETURN(e, ParseTest(std::move(e)));
      } else if (IsOp("(")) {
        RL_ASSIGN_OR_RETURN(e, ParseCall(std::move(e)));
      } else {
        return e;
      }
    }
  }

  Result<ExprPtr> ParseSubscript(ExprPtr obj) {
    int line = Cur().line;
    if (SkipOp(".")) {
      if (Cur().type == TokenType::kName) {
        ExprPtr e = Node(Expr::Kind::kGetattr, line);
        e->name = Cur().value;
        e->a = std::move(obj);
        Next();
        return e;
      }
      if (Cur().type != TokenType::kInteger) return Fail("expected name or number");
      ExprPtr e = Node(Expr::Kind::kGetitem, line);
      RL_ASSIGN_OR_RETURN(e->b, ParseNumber());
      e->a = std::move(obj);
      return e;
    }
    Next();  // [
    if (SkipOp("]")) {  // obj[]: Jinja subscripts with an empty tuple
      ExprPtr e = Node(Expr::Kind::kGetitem, line);
      e->a = std::move(obj);
      e->b = Node(Expr::Kind::kConst, line);
      e->b->value = Json::array();
      return e;
    }
    std::vector<ExprPtr> parts;  // up to three slice bounds
    bool slice = false;
    for (int k = 0; k < 3; ++k) {
      if (IsOp(":") || IsOp("]")) {
        parts.push_back(nullptr);
      } else {
        RL_ASSIGN_OR_RETURN(ExprPtr p, ParseExpression(true));
        parts.push_back(std::move(p));
      }
      if (!SkipOp(":")) break;
      slice = true;
    }
    if (IsOp(",")) return Fail("tuple subscripts are not supported");
    RL_RETURN_IF_ERROR(ExpectOp("]"));
    if (!slice) {
      if (!parts[0]) return Fail("expected a subscript");
      ExprPtr e = Node(Expr::Kind::kGetitem, line);
      e->a = std::move(obj);
      e->b = std::move(parts[0]);
      return e;
    }
    ExprPtr e = Node(Expr::Kind::kSlice, line);
    e->a = std::move(obj);
    parts.resize(3);
    e->args = std::move(parts);
    return e;
  }

  Status ParseCallArgs(Expr* e) {
    RL_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!e->args.empty() || !e->kwargs.empty()) RL_RETURN_IF_ERROR(ExpectOp(","));
      if (IsOp(")")) break;
      if (IsOp("*") || IsOp("**")) return Fail("*args and **kwargs in calls are not supported");
      if (Cur().type == TokenType::kName && Peek().type == TokenType::kOperator && Peek().value == "=") {
        std::string key = Cur().value;
        Next(), Next();
        RL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e->kwargs.emplace_back(key, std::move(v));
      } else {
        if (!e->kwargs.empty()) return Fail("positional argument follows keyword argument");
        RL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        e->args.push_back(std::move(v));
      }
    }
    Next();
    return Status::OK();
  }

  Result<ExprPtr> ParseCall(ExprPtr fn) {
    ExprPtr e = Node(Expr::Kind::kCall, Cur().line);
    e->a = std::move(fn);
    RL_RETURN_IF_ERROR(ParseCallArgs(e.get()));
    return e;
  }

  Result<std::string> DottedName() {
    RL_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (SkipOp(".")) {
      RL_ASSIGN_OR_RETURN(std::string more, ExpectName());
      name += "." + more;
    }
    return name;
  }

  // `| f(args) | g ...`; with start_inline the first filter has no leading pipe.
  Result<ExprPtr> ParseFilters(ExprPtr e, bool start_inline) {
    while (IsOp("|") || start_inline) {
      if (!start_inline) Next();
      start_inline = false;
      int line = Cur().line;
      RL_ASSIGN_OR_RETURN(std::string name, DottedName());
      if (!IsKnownFilter(name)) return Status::DataError("line " + std::to_string(line) + ": no filter named '" + name + "'");
      ExprPtr f = Node(Expr::Kind::kFilter, line);
      f->name = name;
      f->a = std::move(e);
      if (IsOp("(")) RL_RETURN_IF_ERROR(ParseCallArgs(f.get()));
      e = std::move(f);
    }
    return e;
  }

  Result<ExprPtr> ParseTest(ExprPtr e) {
    int line = Cur().line;
    Next();  // is
    ExprPtr t = Node(Expr::Kind::kTest, line);
    t->negated = SkipName("not");
    RL_ASSIGN_OR_RETURN(t->name, DottedName());
    if (!IsKnownTest(t->name)) return Status::DataError("line " + std::to_string(line) + ": no test named '" + t->name + "'");
    t->a = std::move(e);
    const Token& c = Cur();
    bool arg_start = c.type == TokenType::kName || c.type == TokenType::kString || c.type == TokenType::kInteger ||
                     c.type == TokenType::kFloat || IsOp("[") || IsOp("{");
    if (IsOp("(")) {
      RL_RETURN_IF_ERROR(ParseCallArgs(t.get()));
    } else if (arg_start && !IsName("else") && !IsName("or") && !IsName("and")) {
      if (IsName("is")) return Fail("you cannot chain multiple tests with is");
      RL_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
      RL_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
      t->args.push_back(std::move(arg));
    }
    return t;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loops_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Template>> Parse(const std::string& source) {
  RL_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  return Parser(std::move(tokens)).Run();
}

}  // namespace rl::chat::jinja
