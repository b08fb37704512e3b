// The expression half of the parser (jinja_parser_internal.h), with Jinja's precedence.
#include <cstring>
#include <initializer_list>

#include "rl/model/chat/jinja_filters.h"
#include "rl/model/chat/jinja_parser_internal.h"

namespace rl::chat::jinja::internal {

bool Parser::IsTupleEnd(const Names& extra) const {
  const Token& c = Cur();
  if (c.type == TokenType::kVarEnd || c.type == TokenType::kBlockEnd || c.type == TokenType::kEof) return true;
  if (c.type == TokenType::kOperator && c.value == ")") return true;
  return c.type == TokenType::kName && extra.count(c.value);
}

Result<ExprPtr> Parser::ParseTuple(bool with_condexpr, const Names& extra, bool explicit_parens) {
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

Result<ExprPtr> Parser::ParseExpression(bool with_condexpr) {
  RL_RETURN_IF_ERROR(Deeper());
  auto r = with_condexpr ? ParseCondExpr() : ParseOr();
  --depth_;
  return r;
}

Result<ExprPtr> Parser::ParseCondExpr() {
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

Result<ExprPtr> Parser::ParseBinaryChain(Result<ExprPtr> (Parser::*sub)(), std::initializer_list<const char*> ops,
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

Result<ExprPtr> Parser::ParseNot() {
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

Result<ExprPtr> Parser::ParseCompare() {
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

Result<ExprPtr> Parser::ParseUnary(bool with_filter) {
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

Result<ExprPtr> Parser::ParsePrimary() {
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

Result<ExprPtr> Parser::ParseNumber() {
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

Result<ExprPtr> Parser::ParseList() {
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

Result<ExprPtr> Parser::ParseDict() {
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

Result<ExprPtr> Parser::ParsePostfix(ExprPtr e) {
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

Result<ExprPtr> Parser::ParseFilterExpr(ExprPtr e) {
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

Result<ExprPtr> Parser::ParseSubscript(ExprPtr obj) {
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

Status Parser::ParseCallArgs(Expr* e) {
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

Result<ExprPtr> Parser::ParseCall(ExprPtr fn) {
  ExprPtr e = Node(Expr::Kind::kCall, Cur().line);
  e->a = std::move(fn);
  RL_RETURN_IF_ERROR(ParseCallArgs(e.get()));
  return e;
}

Result<std::string> Parser::DottedName() {
  RL_ASSIGN_OR_RETURN(std::string name, ExpectName());
  while (SkipOp(".")) {
    RL_ASSIGN_OR_RETURN(std::string more, ExpectName());
    name += "." + more;
  }
  return name;
}

// `| f(args) | g ...`; with start_inline the first filter has no leading pipe.
Result<ExprPtr> Parser::ParseFilters(ExprPtr e, bool start_inline) {
  while (IsOp("|") || start_inline) {
    if (!start_inline) Next();
    start_inline = false;
    int line = Cur().line;
    RL_ASSIGN_OR_RETURN(std::string name, DottedName());
    ExprPtr f = Node(Expr::Kind::kFilter, line);
    f->name = name;
    f->a = std::move(e);
    if (IsOp("(")) RL_RETURN_IF_ERROR(ParseCallArgs(f.get()));
    e = std::move(f);
  }
  return e;
}

Result<ExprPtr> Parser::ParseTest(ExprPtr e) {
  int line = Cur().line;
  Next();  // is
  ExprPtr t = Node(Expr::Kind::kTest, line);
  t->negated = SkipName("not");
  RL_ASSIGN_OR_RETURN(t->name, DottedName());
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

}  // namespace rl::chat::jinja::internal
