// Jinja's tests (`x is defined`) and the `in` operator. Declared in jinja_filters.h.
#include <cmath>
#include <map>

#include "rl/model/chat/jinja_filters.h"
#include "rl/model/chat/jinja_methods.h"

namespace rl::chat::jinja {
namespace {

bool IsData(const Value& v, bool (Json::*pred)() const noexcept) { return v.is_data() && (v.data().*pred)(); }

Result<const Value*> Arg(const std::string& test, std::vector<Value>& args) {
  if (args.size() != 1) return Status::DataError("test '" + test + "' takes exactly one argument");
  return &args[0];
}

Result<bool> Compare(const std::string& op, const Value& a, const Value& b) {
  if (op == "eq") return PyEquals(a, b);
  if (op == "ne") return !PyEquals(a, b);
  if (op == "lt") return PyLess(a, b);
  if (op == "gt") return PyLess(b, a);
  RL_ASSIGN_OR_RETURN(bool less, PyLess(op == "le" ? b : a, op == "le" ? a : b));
  return !less;  // le: !(b < a); ge: !(a < b)
}

const std::map<std::string, std::string>& CompareAliases() {
  static const std::map<std::string, std::string> k = {
      {"eq", "eq"}, {"equalto", "eq"}, {"==", "eq"}, {"ne", "ne"}, {"!=", "ne"}, {"lt", "lt"}, {"lessthan", "lt"},
      {"<", "lt"},  {"le", "le"},      {"<=", "le"}, {"gt", "gt"}, {">", "gt"},  {"greaterthan", "gt"},
      {"ge", "ge"}, {">=", "ge"}};
  return k;
}

Result<int64_t> IntValue(const std::string& test, const Value& v) {
  if (v.is_undefined()) return UndefinedError(v);
  if (!v.is_data() || !IsInt(v.data())) return Status::DataError("test '" + test + "' needs an integer, got " + TypeName(v));
  return AsInt64(v.data());
}

}  // namespace

bool IsKnownTest(const std::string& name) {
  static const char* kNames[] = {"boolean", "callable", "defined", "divisibleby", "escaped", "even", "false",
                                 "filter", "float", "in", "integer", "iterable", "lower", "mapping", "none",
                                 "number", "odd", "sameas", "sequence", "string", "test", "true", "undefined",
                                 "upper"};
  for (const char* n : kNames)
    if (name == n) return true;
  return CompareAliases().count(name) > 0;
}

Result<bool> Contains(const Value& container, const Value& item) {
  if (container.is_undefined()) return false;
  if (container.kind() == Value::Kind::kList) {
    for (const Value& e : *container.list())
      if (PyEquals(e, item)) return true;
    return false;
  }
  if (container.is_data()) {
    const Json& c = container.data();
    if (c.is_string()) {
      if (!item.is_string()) return Status::DataError("'in <string>' requires string as left operand, not " + TypeName(item));
      return c.get_ref<const std::string&>().find(item.str()) != std::string::npos;
    }
    if (c.is_array()) {
      for (const auto& e : c)
        if (PyEquals(container.Child(e), item)) return true;
      return false;
    }
    if (c.is_object()) return item.is_string() && c.contains(item.str());
  }
  return Status::DataError("argument of type '" + TypeName(container) + "' is not iterable");
}

Result<bool> ApplyTest(const std::string& name, const Value& v, std::vector<Value>& args) {
  auto cmp = CompareAliases().find(name);
  if (cmp != CompareAliases().end()) {
    RL_ASSIGN_OR_RETURN(const Value* other, Arg(name, args));
    return Compare(cmp->second, v, *other);
  }
  static const char* kUnary[] = {"defined", "undefined", "none", "boolean", "true", "false", "integer", "float",
                                 "number", "string", "mapping", "iterable", "sequence", "callable", "escaped",
                                 "lower", "upper", "odd", "even", "filter", "test"};
  for (const char* u : kUnary)
    if (name == u && !args.empty())
      return Status::DataError("test_" + name + "() takes 1 positional argument but " + std::to_string(args.size() + 1) +
                               " were given");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return IsData(v, &Json::is_null);
  if (name == "boolean") return IsData(v, &Json::is_boolean);
  if (name == "true") return IsData(v, &Json::is_boolean) && v.data().get<bool>();
  if (name == "false") return IsData(v, &Json::is_boolean) && !v.data().get<bool>();
  if (name == "integer") return IsData(v, &Json::is_number_integer);
  if (name == "float") return IsData(v, &Json::is_number_float);
  if (name == "number") return IsData(v, &Json::is_number) || IsData(v, &Json::is_boolean);
  if (name == "string") return v.is_string();
  if (name == "mapping") return IsData(v, &Json::is_object);
  if (name == "iterable" || name == "sequence")
    return v.is_undefined() || v.kind() == Value::Kind::kList || IsData(v, &Json::is_string) || IsData(v, &Json::is_array) || IsData(v, &Json::is_object);
  if (name == "callable") return v.kind() == Value::Kind::kCallable;
  if (name == "escaped") return false;
  if (name == "lower" || name == "upper") {
    if (!v.is_string()) return Status::DataError("test '" + name + "' needs a string, got " + TypeName(v));
    std::vector<Value> none;
    Kwargs nokw;
    RL_ASSIGN_OR_RETURN(Value r, GetAttr(v, name == "lower" ? "islower" : "isupper"));
    RL_ASSIGN_OR_RETURN(Value b, r.callable()->fn(none, nokw));
    return Truthy(b);
  }
  if (name == "odd" || name == "even") {
    RL_ASSIGN_OR_RETURN(int64_t i, IntValue(name, v));
    return (((i % 2) + 2) % 2 == 1) == (name == "odd");
  }
  if (name == "divisibleby") {
    RL_ASSIGN_OR_RETURN(const Value* d, Arg(name, args));
    RL_ASSIGN_OR_RETURN(int64_t i, IntValue(name, v));
    RL_ASSIGN_OR_RETURN(int64_t n, IntValue(name, *d));
    if (n == 0) return Status::DataError("integer division or modulo by zero");
    return i % n == 0;
  }
  if (name == "sameas") {
    RL_ASSIGN_OR_RETURN(const Value* o, Arg(name, args));
    if (v.is_data() && o->is_data() && (v.data().is_null() || v.data().is_boolean())) return v.data() == o->data();
    if (v.kind() == Value::Kind::kObject && o->kind() == Value::Kind::kObject) return v.object() == o->object();
    return false;
  }
  if (name == "in") {
    RL_ASSIGN_OR_RETURN(const Value* o, Arg(name, args));
    return Contains(*o, v);
  }
  if (name == "filter" || name == "test") {
    if (!v.is_string()) return false;
    return name == "filter" ? IsKnownFilter(v.str()) : IsKnownTest(v.str());
  }
  return Status::DataError("no test named '" + name + "'");
}

}  // namespace rl::chat::jinja
