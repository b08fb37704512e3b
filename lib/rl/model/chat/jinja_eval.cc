#include "rl/model/chat/jinja_eval.h"

#include <map>
#include <memory>

#include "rl/model/chat/jinja_filters.h"
#include "rl/model/chat/jinja_methods.h"
#include "rl/model/chat/jinja_ops.h"

namespace rl::chat::jinja {
namespace {

class Scope {
 public:
  explicit Scope(Scope* parent) : parent_(parent) {}
  const Value* Find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent_) {
      auto it = s->vars_.find(name);
      if (it != s->vars_.end()) return &it->second;
    }
    return nullptr;
  }
  void Set(const std::string& name, Value v) { vars_[name] = std::move(v); }

 private:
  Scope* parent_;
  std::map<std::string, Value> vars_;
};

enum class Flow { kNormal, kBreak, kContinue };

Value Globals(const std::string& name);

class Evaluator {
 public:
  Evaluator(const RenderLimits& limits) : limits_(limits) {}

  Result<std::string> Run(const Template& tpl, const Variables& vars) {
    Scope globals(nullptr);
    for (const char* g : {"range", "dict", "namespace"}) globals.Set(g, Globals(g));
    Scope root(&globals);
    for (const auto& [k, v] : vars) root.Set(k, v);
    root_ = &root;
    RL_RETURN_IF_ERROR(ExecBody(tpl.body, root));
    return std::move(out_);
  }

 private:
  Status Locate(Status st, int line) {
    if (located_ || st.ok()) return st;
    located_ = true;
    return st.WithContext("line " + std::to_string(line));
  }

  Status Append(const std::string& s) {
    if (out_.size() + s.size() > limits_.max_output_bytes)
      return Status::TooLarge("output larger than " + std::to_string(limits_.max_output_bytes) + " bytes");
    out_ += s;
    return Status::OK();
  }

  Status ExecBody(const Body& body, Scope& scope) {
    for (const auto& st : body) {
      Status s = Exec(*st, scope);
      if (!s.ok()) return Locate(s, st->line);
      if (flow_ != Flow::kNormal) break;
    }
    return Status::OK();
  }

  // Renders body into a string of its own (set blocks, filter blocks, macros).
  Result<std::string> Capture(const Body& body, Scope& scope) {
    std::string saved = std::move(out_);
    out_.clear();
    Status s = ExecBody(body, scope);
    std::string text = std::move(out_);
    out_ = std::move(saved);
    if (!s.ok()) return s;
    if (out_.size() + text.size() > limits_.max_output_bytes)
      return Status::TooLarge("output larger than " + std::to_string(limits_.max_output_bytes) + " bytes");
    return text;
  }

  Status Exec(const Stmt& st, Scope& scope) {
    switch (st.kind) {
      case Stmt::Kind::kText: return Append(st.text);
      case Stmt::Kind::kPrint: {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*st.expr, scope));
        return Append(PyStr(v));
      }
      case Stmt::Kind::kIf:
        for (size_t i = 0; i < st.conds.size(); ++i) {
          RL_ASSIGN_OR_RETURN(Value c, Eval(*st.conds[i], scope));
          if (Truthy(c)) return ExecBody(st.bodies[i], scope);
        }
        return ExecBody(st.else_body, scope);
      case Stmt::Kind::kFor: return ExecFor(st, scope);
      case Stmt::Kind::kSet: {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*st.expr, scope));
        return Assign(st, std::move(v), scope);
      }
      case Stmt::Kind::kSetBlock: {
        Scope inner(&scope);
        RL_ASSIGN_OR_RETURN(std::string text, Capture(st.body, inner));
        Value v(text);
        if (st.expr) {
          RL_ASSIGN_OR_RETURN(v, ApplyFilterChain(*st.expr, v, scope));
        }
        return Assign(st, std::move(v), scope);
      }
      case Stmt::Kind::kFilterBlock: {
        Scope inner(&scope);
        RL_ASSIGN_OR_RETURN(std::string text, Capture(st.body, inner));
        RL_ASSIGN_OR_RETURN(Value v, ApplyFilterChain(*st.expr, Value(text), scope));
        return Append(PyStr(v));
      }
      case Stmt::Kind::kMacro:
        scope.Set(st.name, MakeMacro(st, st.name));
        return Status::OK();
      case Stmt::Kind::kCallBlock: return ExecCallBlock(st, scope);
      case Stmt::Kind::kWith: {
        Scope inner(&scope);
        for (size_t i = 0; i < st.targets.size(); ++i) {
          RL_ASSIGN_OR_RETURN(Value v, Eval(*st.defaults[i], scope));
          inner.Set(st.targets[i], std::move(v));
        }
        return ExecBody(st.body, inner);
      }
      case Stmt::Kind::kBreak: flow_ = Flow::kBreak; return Status::OK();
      case Stmt::Kind::kContinue: flow_ = Flow::kContinue; return Status::OK();
    }
    return Status::Internal("unknown statement");
  }

  Status Unpack(const std::vector<std::string>& targets, const Value& v, Scope& scope) {
    if (targets.size() == 1) {
      scope.Set(targets[0], v);
      return Status::OK();
    }
    RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    if (items.size() < targets.size())
      return Status::DataError("not enough values to unpack (expected " + std::to_string(targets.size()) + ", got " +
                               std::to_string(items.size()) + ")");
    if (items.size() > targets.size())
      return Status::DataError("too many values to unpack (expected " + std::to_string(targets.size()) + ")");
    for (size_t i = 0; i < targets.size(); ++i) scope.Set(targets[i], items[i]);
    return Status::OK();
  }

  Status Assign(const Stmt& st, Value v, Scope& scope) {
    if (st.name.empty()) return Unpack(st.targets, v, scope);
    const Value* ns = scope.Find(st.targets[0]);
    if (!ns || ns->kind() != Value::Kind::kObject || ns->object()->type != Object::Type::kNamespace)
      return Status::DataError("cannot assign attribute on non-namespace object");
    ns->object()->Set(st.name, std::move(v));
    return Status::OK();
  }

  Value LoopObject(size_t i, const std::shared_ptr<const std::vector<Value>>& items) {
    auto o = std::make_shared<Object>();
    o->type = Object::Type::kLoop;
    o->index = i;
    o->items = items;
    return Value::FromObject(std::move(o));
  }

  Status ExecFor(const Stmt& st, Scope& scope) {
    RL_ASSIGN_OR_RETURN(Value seq, Eval(*st.expr, scope));
    RL_ASSIGN_OR_RETURN(std::vector<Value> all, Iterate(seq));
    auto shared = std::make_shared<std::vector<Value>>();
    std::vector<Value>& items = *shared;
    for (Value& item : all) {
      if (st.cond) {
        Scope probe(&scope);
        RL_RETURN_IF_ERROR(Unpack(st.targets, item, probe));
        RL_ASSIGN_OR_RETURN(Value keep, Eval(*st.cond, probe));
        if (!Truthy(keep)) continue;
      }
      items.push_back(std::move(item));
    }
    for (size_t i = 0; i < items.size(); ++i) {
      if (++iterations_ > limits_.max_loop_iterations)
        return Status::TooLarge("more than " + std::to_string(limits_.max_loop_iterations) + " loop iterations");
      Scope inner(&scope);
      RL_RETURN_IF_ERROR(Unpack(st.targets, items[i], inner));
      inner.Set("loop", LoopObject(i, shared));
      RL_RETURN_IF_ERROR(ExecBody(st.body, inner));
      Flow f = flow_;
      flow_ = Flow::kNormal;
      if (f == Flow::kBreak) break;
    }
    if (items.empty()) {
      Scope inner(&scope);
      return ExecBody(st.else_body, inner);
    }
    return Status::OK();
  }

  Value MakeMacro(const Stmt& st, const std::string& name) {
    const Stmt* def = &st;
    return Value::FromFunction(name, [this, def](std::vector<Value>& args, Kwargs& kwargs) -> Result<Value> {
      return CallMacro(*def, args, kwargs);
    });
  }

  Result<Value> CallMacro(const Stmt& def, std::vector<Value>& args, Kwargs& kwargs) {
    const std::string& name = def.kind == Stmt::Kind::kMacro ? def.name : std::string("caller");
    if (args.size() > def.params.size())
      return Status::DataError("macro '" + name + "' takes not more than " + std::to_string(def.params.size()) +
                               " argument(s)");
    if (call_depth_ >= limits_.max_call_depth)
      return Status::TooLarge("macro calls nested deeper than " + std::to_string(limits_.max_call_depth));
    Scope scope(root_);
    std::vector<bool> bound(def.params.size(), false);
    for (size_t i = 0; i < args.size(); ++i) {
      scope.Set(def.params[i], args[i]);
      bound[i] = true;
    }
    for (auto& [k, v] : kwargs) {
      size_t i = 0;
      while (i < def.params.size() && def.params[i] != k) ++i;
      if (i == def.params.size()) {
        if (k == "caller") {
          scope.Set(k, v);
          continue;
        }
        return Status::DataError("macro '" + name + "' takes no keyword argument '" + k + "'");
      }
      if (bound[i]) return Status::DataError("macro '" + name + "' got multiple values for argument '" + k + "'");
      scope.Set(k, v);
      bound[i] = true;
    }
    for (size_t i = 0; i < def.params.size(); ++i) {
      if (bound[i]) continue;
      if (def.defaults[i]) {
        RL_ASSIGN_OR_RETURN(Value d, Eval(*def.defaults[i], scope));
        scope.Set(def.params[i], std::move(d));
      } else {
        scope.Set(def.params[i], Value::Undefined("parameter '" + def.params[i] + "' was not provided"));
      }
    }
    ++call_depth_;
    Flow saved = flow_;
    flow_ = Flow::kNormal;
    auto text = Capture(def.body, scope);
    flow_ = saved;
    --call_depth_;
    if (!text.ok()) return text.status();
    return Value(std::move(text).value());
  }

  Status ExecCallBlock(const Stmt& st, Scope& scope) {
    const Expr& call = *st.expr;
    RL_ASSIGN_OR_RETURN(Value fn, Eval(*call.a, scope));
    std::vector<Value> args;
    Kwargs kwargs;
    RL_RETURN_IF_ERROR(EvalArgs(call, scope, &args, &kwargs));
    const Stmt* def = &st;
    kwargs.emplace_back("caller", Value::FromFunction("caller", [this, def](std::vector<Value>& a, Kwargs& k) {
                          return CallMacro(*def, a, k);
                        }));
    RL_ASSIGN_OR_RETURN(Value r, CallValue(fn, args, kwargs));
    return Append(PyStr(r));
  }

  // ---- expressions ----

  Result<Value> Eval(const Expr& e, Scope& scope) {
    Result<Value> r = EvalInner(e, scope);
    if (!r.ok()) return Locate(r.status(), e.line);
    return r;
  }

  Status EvalArgs(const Expr& e, Scope& scope, std::vector<Value>* args, Kwargs* kwargs) {
    for (const auto& a : e.args) {
      RL_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
      args->push_back(std::move(v));
    }
    for (const auto& [k, a] : e.kwargs) {
      RL_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
      kwargs->emplace_back(k, std::move(v));
    }
    return Status::OK();
  }

  Result<Value> CallValue(const Value& fn, std::vector<Value>& args, Kwargs& kwargs) {
    if (fn.is_undefined()) return UndefinedError(fn);
    if (fn.kind() != Value::Kind::kCallable) return Status::DataError("'" + TypeName(fn) + "' object is not callable");
    return fn.callable()->fn(args, kwargs);
  }

  // A filter chain whose innermost input is `input` (set and filter blocks).
  Result<Value> ApplyFilterChain(const Expr& f, Value input, Scope& scope) {
    if (f.a) {
      RL_ASSIGN_OR_RETURN(input, ApplyFilterChain(*f.a, std::move(input), scope));
    }
    std::vector<Value> args;
    Kwargs kwargs;
    RL_RETURN_IF_ERROR(EvalArgs(f, scope, &args, &kwargs));
    return ApplyFilter(f.name, input, args, kwargs);
  }

  Result<Value> Data(const Value& v, const char* where) {
    if (v.is_data()) return v;
    if (v.is_undefined()) return UndefinedError(v);
    return Status::DataError(std::string("a ") + TypeName(v) + " cannot be stored in a " + where);
  }

  Result<Value> EvalInner(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::kConst: return Value(e.value);
      case Expr::Kind::kList: {
        std::vector<Value> items;
        for (const auto& a : e.args) {
          RL_ASSIGN_OR_RETURN(Value v, Eval(*a, scope));
          items.push_back(std::move(v));
        }
        return Value::MakeList(std::move(items));
      }
      case Expr::Kind::kDict: {
        Json out = Json::object();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          RL_ASSIGN_OR_RETURN(Value k, Eval(*e.args[i], scope));
          if (!k.is_string()) return Status::DataError("dict keys other than strings are not supported");
          RL_ASSIGN_OR_RETURN(Value v, Eval(*e.args[i + 1], scope));
          RL_ASSIGN_OR_RETURN(v, Data(v, "dict"));
          out[k.str()] = v.data();
        }
        return Value(std::move(out));
      }
      case Expr::Kind::kName: {
        const Value* v = scope.Find(e.name);
        if (v) return *v;
        return Value::Undefined("'" + e.name + "' is undefined");
      }
      case Expr::Kind::kGetattr: {
        RL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, scope));
        return GetAttr(obj, e.name);
      }
      case Expr::Kind::kGetitem: {
        RL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, scope));
        RL_ASSIGN_OR_RETURN(Value key, Eval(*e.b, scope));
        return GetItem(obj, key);
      }
      case Expr::Kind::kSlice: {
        RL_ASSIGN_OR_RETURN(Value obj, Eval(*e.a, scope));
        Value bounds[3] = {Value(Json(nullptr)), Value(Json(nullptr)), Value(Json(nullptr))};
        for (int i = 0; i < 3; ++i) {
          if (e.args[i]) {
            RL_ASSIGN_OR_RETURN(bounds[i], Eval(*e.args[i], scope));
          }
        }
        return GetSlice(obj, bounds[0], bounds[1], bounds[2]);
      }
      case Expr::Kind::kCall: {
        RL_ASSIGN_OR_RETURN(Value fn, Eval(*e.a, scope));
        std::vector<Value> args;
        Kwargs kwargs;
        RL_RETURN_IF_ERROR(EvalArgs(e, scope, &args, &kwargs));
        return CallValue(fn, args, kwargs);
      }
      case Expr::Kind::kFilter: {
        RL_ASSIGN_OR_RETURN(Value input, Eval(*e.a, scope));
        std::vector<Value> args;
        Kwargs kwargs;
        RL_RETURN_IF_ERROR(EvalArgs(e, scope, &args, &kwargs));
        return ApplyFilter(e.name, input, args, kwargs);
      }
      case Expr::Kind::kTest: {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*e.a, scope));
        std::vector<Value> args;
        Kwargs kwargs;
        RL_RETURN_IF_ERROR(EvalArgs(e, scope, &args, &kwargs));
        if (!kwargs.empty()) return Status::DataError("tests take no keyword arguments here");
        RL_ASSIGN_OR_RETURN(bool r, ApplyTest(e.name, v, args));
        return Value(r != e.negated);
      }
      case Expr::Kind::kNot: {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*e.a, scope));
        return Value(!Truthy(v));
      }
      case Expr::Kind::kNeg:
      case Expr::Kind::kPos: {
        RL_ASSIGN_OR_RETURN(Value v, Eval(*e.a, scope));
        return UnaryOp(e.kind == Expr::Kind::kNeg ? "-" : "+", v);
      }
      case Expr::Kind::kBinary: {
        RL_ASSIGN_OR_RETURN(Value a, Eval(*e.a, scope));
        if (e.name == "and") return Truthy(a) ? Eval(*e.b, scope) : Result<Value>(a);
        if (e.name == "or") return Truthy(a) ? Result<Value>(a) : Eval(*e.b, scope);
        RL_ASSIGN_OR_RETURN(Value b, Eval(*e.b, scope));
        return BinaryOp(e.name, a, b);
      }
      case Expr::Kind::kCompare: {
        RL_ASSIGN_OR_RETURN(Value left, Eval(*e.a, scope));
        for (size_t i = 0; i < e.ops.size(); ++i) {
          RL_ASSIGN_OR_RETURN(Value right, Eval(*e.args[i], scope));
          RL_ASSIGN_OR_RETURN(bool ok, CompareOp(e.ops[i], left, right));
          if (!ok) return Value(false);
          left = std::move(right);
        }
        return Value(true);
      }
      case Expr::Kind::kCondExpr: {
        RL_ASSIGN_OR_RETURN(Value c, Eval(*e.a, scope));
        if (Truthy(c)) return Eval(*e.b, scope);
        if (e.c) return Eval(*e.c, scope);
        return Value::Undefined("the inline if-expression on line " + std::to_string(e.line) +
                                " evaluated to false and no else section was defined.");
      }
    }
    return Status::Internal("unknown expression");
  }

  const RenderLimits& limits_;
  Scope* root_ = nullptr;
  std::string out_;
  Flow flow_ = Flow::kNormal;
  bool located_ = false;
  int call_depth_ = 0;
  int64_t iterations_ = 0;
};

// ---- globals ----

Result<Value> Range(std::vector<Value>& args, Kwargs& kwargs) {
  if (!kwargs.empty() || args.empty() || args.size() > 3) return Status::DataError("range expects 1 to 3 integer arguments");
  int64_t v[3] = {0, 0, 1};
  for (const Value& a : args)
    if (!a.is_data() || !IsInt(a.data())) return Status::DataError("range: '" + TypeName(a) + "' object cannot be interpreted as an integer");
  if (args.size() == 1) v[1] = AsInt64(args[0].data());
  for (size_t i = 0; args.size() > 1 && i < args.size(); ++i) v[i] = AsInt64(args[i].data());
  if (v[2] == 0) return Status::DataError("range() arg 3 must not be zero");
  Json out = Json::array();
  for (int64_t i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
    if (out.size() >= 100000)
      return Status::TooLarge("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    out.push_back(i);
  }
  return Value(out);
}

Result<Value> Namespace(std::vector<Value>& args, Kwargs& kwargs) {
  auto o = std::make_shared<Object>();
  o->type = Object::Type::kNamespace;
  if (args.size() > 1) return Status::DataError("namespace takes at most one positional argument");
  if (args.size() == 1) {
    if (!args[0].is_data() || !args[0].data().is_object()) return Status::DataError("namespace: the argument must be a mapping");
    for (const auto& [k, v] : args[0].data().items()) o->Set(k, args[0].Child(v));
  }
  for (auto& [k, v] : kwargs) o->Set(k, v);
  return Value::FromObject(std::move(o));
}

Result<Value> Dict(std::vector<Value>& args, Kwargs& kwargs) {
  if (!args.empty()) return Status::DataError("dict() with positional arguments is not supported");
  Json out = Json::object();
  for (auto& [k, v] : kwargs) {
    if (!v.is_data()) return Status::DataError("dict(): a " + TypeName(v) + " cannot be stored in a dict");
    out[k] = v.data();
  }
  return Value(out);
}

Value Globals(const std::string& name) {
  if (name == "range") return Value::FromFunction("range", Range);
  if (name == "namespace") return Value::FromFunction("namespace", Namespace);
  return Value::FromFunction("dict", Dict);
}

}  // namespace

Result<std::string> Render(const Template& tpl, const Variables& vars, const RenderLimits& limits) {
  return Evaluator(limits).Run(tpl, vars);
}

}  // namespace rl::chat::jinja
