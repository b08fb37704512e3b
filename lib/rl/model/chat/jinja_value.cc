#include "rl/model/chat/jinja_value.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "rl/model/chat/jinja_text.h"

namespace rl::chat::jinja {

const Json Value::kNull;

bool Object::Get(const std::string& name, Value* out) const {
  if (type == Type::kNamespace) {
    for (const auto& [k, v] : attrs) {
      if (k == name) {
        *out = *v;
        return true;
      }
    }
    return false;
  }
  int64_t n = static_cast<int64_t>(items->size()), k = static_cast<int64_t>(index);
  if (name == "index") *out = Value(k + 1);
  else if (name == "index0") *out = Value(k);
  else if (name == "revindex") *out = Value(n - k);
  else if (name == "revindex0") *out = Value(n - k - 1);
  else if (name == "first") *out = Value(k == 0);
  else if (name == "last") *out = Value(k == n - 1);
  else if (name == "length") *out = Value(n);
  else if (name == "depth") *out = Value(int64_t{1});
  else if (name == "depth0") *out = Value(int64_t{0});
  else if (name == "previtem") *out = k > 0 ? (*items)[index - 1] : Value::Undefined("there is no previous item");
  else if (name == "nextitem") *out = k + 1 < n ? (*items)[index + 1] : Value::Undefined("there is no next item");
  else if (name == "cycle")
    *out = Value::FromFunction("loop.cycle", [k](std::vector<Value>& args, Kwargs&) -> Result<Value> {
      if (args.empty()) return Status::DataError("no items for cycling given");
      return args[static_cast<size_t>(k) % args.size()];
    });
  else return false;
  return true;
}

void Object::Set(const std::string& name, Value v) {
  for (auto& [k, old] : attrs) {
    if (k == name) {
      old = std::make_shared<Value>(std::move(v));
      return;
    }
  }
  attrs.emplace_back(name, std::make_shared<Value>(std::move(v)));
}

Value Value::FromObject(std::shared_ptr<Object> o) {
  Value v;
  v.kind_ = Kind::kObject;
  v.object_ = std::move(o);
  return v;
}

Value Value::FromFunction(std::string name, Function fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.callable_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

Value Value::MakeList(std::vector<Value> items) {
  bool all_data = true;
  for (const Value& v : items) all_data = all_data && v.is_data();
  if (all_data) {
    Json arr = Json::array();
    for (Value& v : items) arr.push_back(v.data());
    return Value(std::move(arr));
  }
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<const std::vector<Value>>(std::move(items));
  return v;
}

Status UndefinedError(const Value& v) {
  return Status::DataError(v.hint().empty() ? "value is undefined" : v.hint());
}

namespace {

std::string JsonTypeName(const Json& j) {
  if (j.is_null()) return "NoneType";
  if (j.is_boolean()) return "bool";
  if (j.is_number_float()) return "float";
  if (j.is_number()) return "int";
  if (j.is_string()) return "str";
  if (j.is_array()) return "list";
  return "dict";
}

}  // namespace

std::string TypeName(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "Undefined";
    case Value::Kind::kObject:
      return v.object()->type == Object::Type::kNamespace ? "Namespace" : "LoopContext";
    case Value::Kind::kCallable: return "function";
    case Value::Kind::kList: return "list";
    case Value::Kind::kData: break;
  }
  return JsonTypeName(v.data());
}

bool IsNumber(const Json& j) { return j.is_number(); }
bool IsInt(const Json& j) { return j.is_boolean() || j.is_number_integer(); }

bool Truthy(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return false;
    case Value::Kind::kObject:
    case Value::Kind::kCallable: return true;
    case Value::Kind::kList: return !v.list()->empty();
    case Value::Kind::kData: break;
  }
  const Json& j = v.data();
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_float()) return j.get<double>() != 0.0;
  if (j.is_number()) return j.get<int64_t>() != 0;
  if (j.is_string()) return !j.get_ref<const std::string&>().empty();
  return !j.empty();
}

namespace {

std::string IntString(const Json& j) {
  if (j.is_number_unsigned()) return std::to_string(j.get<uint64_t>());
  return std::to_string(j.get<int64_t>());
}

void AppendRepr(const Json& j, std::string* out) {
  if (j.is_null()) {
    *out += "None";
  } else if (j.is_boolean()) {
    *out += j.get<bool>() ? "True" : "False";
  } else if (j.is_number_float()) {
    *out += PyReprFloat(j.get<double>());
  } else if (j.is_number()) {
    *out += IntString(j);
  } else if (j.is_string()) {
    *out += PyReprString(j.get_ref<const std::string&>());
  } else if (j.is_array()) {
    *out += '[';
    bool first = true;
    for (const auto& e : j) {
      if (!first) *out += ", ";
      first = false;
      AppendRepr(e, out);
    }
    *out += ']';
  } else {
    *out += '{';
    bool first = true;
    for (const auto& [k, e] : j.items()) {
      if (!first) *out += ", ";
      first = false;
      *out += PyReprString(k);
      *out += ": ";
      AppendRepr(e, out);
    }
    *out += '}';
  }
}

}  // namespace

std::string PyRepr(const Json& j) {
  std::string out;
  AppendRepr(j, &out);
  return out;
}

std::string PyStr(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined: return "";
    case Value::Kind::kCallable: return "<function " + v.callable()->name + ">";
    case Value::Kind::kList: {
      std::string out = "[";
      for (size_t i = 0; i < v.list()->size(); ++i) {
        const Value& e = (*v.list())[i];
        out += i ? ", " : "";
        out += e.is_data() ? PyRepr(e.data()) : e.is_undefined() ? "Undefined" : PyStr(e);
      }
      return out + "]";
    }
    case Value::Kind::kObject: {
      if (v.object()->type == Object::Type::kLoop) return "<LoopContext>";
      std::string out = "<Namespace {";
      bool first = true;
      for (const auto& [k, e] : v.object()->attrs) {
        if (!first) out += ", ";
        first = false;
        out += PyReprString(k) + ": " + (e->is_data() ? PyRepr(e->data()) : PyStr(*e));
      }
      return out + "}>";
    }
    case Value::Kind::kData: break;
  }
  if (v.data().is_string()) return v.str();
  return PyRepr(v.data());
}

namespace {

bool JsonEquals(const Json& a, const Json& b) {
  if (a.is_number() || a.is_boolean()) {
    if (!(b.is_number() || b.is_boolean())) return false;
    if (IsInt(a) && IsInt(b)) {
      if (a.is_number_unsigned() || b.is_number_unsigned()) return a.get<uint64_t>() == b.get<uint64_t>();
      return (a.is_boolean() ? int64_t{a.get<bool>()} : a.get<int64_t>()) ==
             (b.is_boolean() ? int64_t{b.get<bool>()} : b.get<int64_t>());
    }
    auto d = [](const Json& j) { return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>(); };
    return d(a) == d(b);
  }
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!JsonEquals(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (const auto& [k, e] : a.items()) {
      auto it = b.find(k);
      if (it == b.end() || !JsonEquals(e, *it)) return false;
    }
    return true;
  }
  return a == b;
}

double AsDouble(const Json& j) { return j.is_boolean() ? (j.get<bool>() ? 1.0 : 0.0) : j.get<double>(); }

Result<bool> JsonLess(const Json& a, const Json& b) {
  bool an = a.is_number() || a.is_boolean(), bn = b.is_number() || b.is_boolean();
  if (an && bn) {
    if (IsInt(a) && IsInt(b) && !a.is_number_unsigned() && !b.is_number_unsigned()) {
      int64_t x = a.is_boolean() ? a.get<bool>() : a.get<int64_t>();
      int64_t y = b.is_boolean() ? b.get<bool>() : b.get<int64_t>();
      return x < y;
    }
    return AsDouble(a) < AsDouble(b);
  }
  if (a.is_string() && b.is_string()) return a.get_ref<const std::string&>() < b.get_ref<const std::string&>();
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (JsonEquals(a[i], b[i])) continue;
      return JsonLess(a[i], b[i]);
    }
    return a.size() < b.size();
  }
  return Status::DataError("'<' not supported between instances of '" + JsonTypeName(a) + "' and '" +
                           JsonTypeName(b) + "'");
}

}  // namespace

bool PyEquals(const Value& a, const Value& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined: return true;
    case Value::Kind::kObject: return a.object() == b.object();
    case Value::Kind::kCallable: return a.callable() == b.callable();
    case Value::Kind::kList: {
      if (a.list()->size() != b.list()->size()) return false;
      for (size_t i = 0; i < a.list()->size(); ++i)
        if (!PyEquals((*a.list())[i], (*b.list())[i])) return false;
      return true;
    }
    case Value::Kind::kData: return JsonEquals(a.data(), b.data());
  }
  return false;
}

Result<bool> PyLess(const Value& a, const Value& b) {
  if (!a.is_data() || !b.is_data()) {
    if (a.is_undefined()) return UndefinedError(a);
    if (b.is_undefined()) return UndefinedError(b);
    return Status::DataError("'<' not supported between instances of '" + TypeName(a) + "' and '" +
                             TypeName(b) + "'");
  }
  return JsonLess(a.data(), b.data());
}

namespace {

void DumpString(const std::string& s, bool ensure_ascii, std::string* out) {
  out->push_back('"');
  char buf[16];
  for (char32_t c : DecodeUtf8(s)) {
    switch (c) {
      case '"': *out += "\\\""; continue;
      case '\\': *out += "\\\\"; continue;
      case '\n': *out += "\\n"; continue;
      case '\r': *out += "\\r"; continue;
      case '\t': *out += "\\t"; continue;
      case '\b': *out += "\\b"; continue;
      case '\f': *out += "\\f"; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c >= 0x7f)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xd800 | (v >> 10)),
                      static_cast<unsigned>(0xdc00 | (v & 0x3ff)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      *out += buf;
    } else {
      AppendUtf8(c, out);
    }
  }
  out->push_back('"');
}

void DumpJson(const Json& j, const JsonDumpOptions& o, int level, std::string* out) {
  if (j.is_null()) {
    *out += "null";
  } else if (j.is_boolean()) {
    *out += j.get<bool>() ? "true" : "false";
  } else if (j.is_number_float()) {
    double d = j.get<double>();
    *out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity") : PyReprFloat(d);
  } else if (j.is_number()) {
    *out += IntString(j);
  } else if (j.is_string()) {
    DumpString(j.get_ref<const std::string&>(), o.ensure_ascii, out);
  } else if (j.empty()) {
    *out += j.is_array() ? "[]" : "{}";
  } else {
    std::string newline, inner;
    if (o.has_indent) {
      newline = "\n";
      for (int i = 0; i <= level; ++i) inner += o.indent;
    }
    std::string closing_indent = o.has_indent ? "\n" + inner.substr(0, inner.size() - o.indent.size()) : "";
    *out += j.is_array() ? '[' : '{';
    *out += newline + inner;
    bool first = true;
    if (j.is_array()) {
      for (const auto& e : j) {
        if (!first) *out += o.item_separator + newline + inner;
        first = false;
        DumpJson(e, o, level + 1, out);
      }
    } else {
      std::vector<std::pair<std::string, const Json*>> items;
      for (const auto& [k, e] : j.items()) items.emplace_back(k, &e);
      if (o.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      for (const auto& [k, e] : items) {
        if (!first) *out += o.item_separator + newline + inner;
        first = false;
        DumpString(k, o.ensure_ascii, out);
        *out += o.key_separator;
        DumpJson(*e, o, level + 1, out);
      }
    }
    *out += closing_indent;
    *out += j.is_array() ? ']' : '}';
  }
}

}  // namespace

Result<std::string> PyJsonDumps(const Value& v, const JsonDumpOptions& options) {
  if (!v.is_data()) return Status::DataError("Object of type " + TypeName(v) + " is not JSON serializable");
  std::string out;
  DumpJson(v.data(), options, 0, &out);
  return out;
}

}  // namespace rl::chat::jinja
