// The syntax tree of a Jinja template: expressions and statements, built by jinja_parser and
// walked by jinja_eval. Each node keeps the template line it came from, for error messages.
// Thread safety: immutable after parsing; may be walked by any number of threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "rl/model/chat/jinja_value.h"

namespace rl::chat::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using ExprKwargs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kConst,     // value
    kList,      // args: the items (tuples too)
    kDict,      // kwargs-like pairs in args: key, value, key, value, ...
    kName,      // name
    kGetattr,   // a.name
    kGetitem,   // a[b]
    kSlice,     // a[args[0]:args[1]:args[2]]; a null arg is an omitted bound
    kCall,      // a(args, kwargs)
    kFilter,    // a | name(args, kwargs); a is null in a {% filter %} block's chain
    kTest,      // a is [not] name(args); negated in `negated`
    kNot,       // not a
    kNeg,       // -a
    kPos,       // +a
    kBinary,    // a name b, name in + - * / // % ** ~ and or
    kCompare,   // a then (ops[i], args[i]) pairs
    kCondExpr,  // b if a else c (c may be null)
  };
  Kind kind;
  int line = 0;
  Json value;
  std::string name;
  bool negated = false;
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  ExprKwargs kwargs;
  std::vector<std::string> ops;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,      // text
    kPrint,     // {{ expr }}
    kIf,        // conds[i] -> bodies[i]; else_body
    kFor,       // for targets in expr [if cond] body [else else_body]
    kSet,       // set targets = expr; or ns.attr = expr (attr set)
    kSetBlock,  // set targets %}body{% endset (filter: expr chain applied to the text)
    kMacro,     // macro name(params = defaults) body
    kCallBlock, // call(params) expr %}body{% endcall
    kFilterBlock,
    kWith,      // with targets = values body
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;  // macro name; namespace attribute for kSet on ns.attr
  ExprPtr expr;      // print, set value, for iterable, call expression, filter chain
  ExprPtr cond;      // for's inline if
  std::vector<std::string> targets;
  std::vector<ExprPtr> conds;
  std::vector<Body> bodies;
  Body body, else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param; null when the param has none
};

struct Template {
  Body body;
};

}  // namespace rl::chat::jinja
