#include "rl/model/chat/jinja_methods.h"

#include <algorithm>
#include <set>

#include "rl/model/chat/jinja_text.h"

namespace rl::chat::jinja {
namespace {

std::string ObjectTypeRepr(const Value& v) {
  if (v.is_data() && v.data().is_null()) return "None";
  return TypeName(v) + " object";
}

Value Missing(const Value& obj, const Value& key) {
  if (key.is_string()) return Value::Undefined("'" + ObjectTypeRepr(obj) + "' has no attribute '" + key.str() + "'");
  return Value::Undefined("'" + ObjectTypeRepr(obj) + "' has no element " + PyStr(key));
}

Status ArgError(const std::string& method, const std::string& what) {
  return Status::DataError(method + "() " + what);
}

// Positional argument i as an optional string (None or absent: unset).
Result<std::optional<std::string>> OptString(const std::string& m, std::vector<Value>& args, size_t i) {
  if (i >= args.size() || (args[i].is_data() && args[i].data().is_null())) return std::optional<std::string>();
  if (!args[i].is_string()) return ArgError(m, "argument must be str or None, not " + TypeName(args[i]));
  return std::optional<std::string>(args[i].str());
}

Result<std::string> ReqString(const std::string& m, std::vector<Value>& args, size_t i) {
  if (i >= args.size()) return ArgError(m, "takes more arguments");
  if (!args[i].is_string()) return ArgError(m, "argument must be str, not " + TypeName(args[i]));
  return args[i].str();
}

Result<int64_t> OptInt(const std::string& m, std::vector<Value>& args, size_t i, int64_t def) {
  if (i >= args.size()) return def;
  if (!args[i].is_data() || !IsInt(args[i].data())) return ArgError(m, "integer argument expected, got " + TypeName(args[i]));
  return AsInt64(args[i].data());
}

// Moves split's keyword arguments (sep=, maxsplit=) into their positions.
Status PositionKwargs(const std::string& m, std::vector<Value>& args, Kwargs& kwargs,
                      const std::vector<std::string>& names, const std::vector<Value>& defaults) {
  for (auto& [k, v] : kwargs) {
    auto it = std::find(names.begin(), names.end(), k);
    if (it == names.end()) return ArgError(m, "got an unexpected keyword argument '" + k + "'");
    size_t i = it - names.begin();
    while (args.size() <= i) args.push_back(defaults[args.size()]);
    args[i] = v;
  }
  kwargs.clear();
  if (args.size() > names.size()) return ArgError(m, "takes at most " + std::to_string(names.size()) + " arguments");
  return Status::OK();
}

Value StringList(const std::vector<std::string>& parts) {
  Json arr = Json::array();
  for (const auto& p : parts) arr.push_back(p);
  return Value(arr);
}

Result<Value> Format(const std::string& fmt, std::vector<Value>& args, Kwargs& kwargs) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '}' ) {
      if (i + 1 < fmt.size() && fmt[i + 1] == '}') ++i;
      else return Status::DataError("Single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t end = fmt.find('}', i);
    if (end == std::string::npos) return Status::DataError("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, end - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos)
      return Status::DataError("str.format: conversions, specs and lookups are not supported");
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      size_t idx = field.empty() ? auto_index++ : std::stoul(field);
      if (idx >= args.size()) return Status::DataError("Replacement index " + std::to_string(idx) + " out of range");
      v = &args[idx];
    } else {
      for (auto& [k, kv] : kwargs)
        if (k == field) v = &kv;
      if (!v) return Status::DataError("KeyError: '" + field + "'");
    }
    out += PyStr(*v);
    i = end;
  }
  return Value(out);
}

bool AllAscii(const std::string& s, int (*pred)(int)) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (c >= 0x80 || !pred(c)) return false;
  return true;
}

Result<Value> CallStrMethod(const std::string& s, const std::string& m, std::vector<Value>& args, Kwargs& kwargs) {
  if (m == "split" || m == "rsplit") {
    RL_RETURN_IF_ERROR(PositionKwargs(m, args, kwargs, {"sep", "maxsplit"}, {Value(Json(nullptr)), Value(Json(-1))}));
    RL_ASSIGN_OR_RETURN(auto sep, OptString(m, args, 0));
    RL_ASSIGN_OR_RETURN(int64_t maxsplit, OptInt(m, args, 1, -1));
    if (sep && sep->empty()) return Status::DataError("empty separator");
    return StringList(PySplit(s, sep, maxsplit, m == "rsplit"));
  }
  if (m == "splitlines") {
    RL_RETURN_IF_ERROR(PositionKwargs(m, args, kwargs, {"keepends"}, {Value(Json(false))}));
    return StringList(PySplitLines(s, !args.empty() && Truthy(args[0])));
  }
  if (!kwargs.empty() && m != "format") return ArgError(m, "takes no keyword arguments");
  if (m == "strip" || m == "lstrip" || m == "rstrip") {
    RL_ASSIGN_OR_RETURN(auto chars, OptString(m, args, 0));
    return Value(PyStrip(s, chars, m != "rstrip", m != "lstrip"));
  }
  if (m == "startswith" || m == "endswith") {
    if (args.size() != 1) return ArgError(m, "takes exactly one argument (start and end are not supported)");
    std::vector<std::string> options;
    if (args[0].is_data() && args[0].data().is_array()) {
      for (const auto& e : args[0].data()) {
        if (!e.is_string()) return ArgError(m, "tuple for startswith must only contain str");
        options.push_back(e.get<std::string>());
      }
    } else {
      RL_ASSIGN_OR_RETURN(std::string one, ReqString(m, args, 0));
      options.push_back(one);
    }
    for (const auto& o : options) {
      bool hit = m == "startswith" ? s.compare(0, o.size(), o) == 0
                                   : s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0;
      if (hit) return Value(true);
    }
    return Value(false);
  }
  if (m == "replace") {
    RL_ASSIGN_OR_RETURN(std::string old, ReqString(m, args, 0));
    RL_ASSIGN_OR_RETURN(std::string repl, ReqString(m, args, 1));
    RL_ASSIGN_OR_RETURN(int64_t count, OptInt(m, args, 2, -1));
    return Value(PyReplace(s, old, repl, count));
  }
  if (m == "upper") return Value(AsciiUpper(s));
  if (m == "lower") return Value(AsciiLower(s));
  if (m == "title") return Value(PyTitle(s));
  if (m == "capitalize") return Value(PyCapitalize(s));
  if (m == "find" || m == "rfind" || m == "count") {
    if (args.size() != 1) return ArgError(m, "takes exactly one argument (start and end are not supported)");
    RL_ASSIGN_OR_RETURN(std::string sub, ReqString(m, args, 0));
    if (m == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(CodePointCount(s) + 1));
      int64_t n = 0;
      for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
      return Value(n);
    }
    size_t at = m == "find" ? s.find(sub) : s.rfind(sub);
    if (at == std::string::npos) return Value(int64_t{-1});
    return Value(static_cast<int64_t>(CodePointCount(s.substr(0, at))));
  }
  if (m == "join") {
    if (args.size() != 1) return ArgError(m, "takes exactly one argument");
    RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(args[0]));
    std::string out;
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) return Status::DataError("sequence item " + std::to_string(i) + ": expected str instance, " + TypeName(items[i]) + " found");
      if (i) out += s;
      out += items[i].str();
    }
    return Value(out);
  }
  if (m == "format") return Format(s, args, kwargs);
  if (m == "removeprefix" || m == "removesuffix") {
    RL_ASSIGN_OR_RETURN(std::string a, ReqString(m, args, 0));
    if (m == "removeprefix" && s.compare(0, a.size(), a) == 0) return Value(s.substr(a.size()));
    if (m == "removesuffix" && !a.empty() && s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0)
      return Value(s.substr(0, s.size() - a.size()));
    return Value(s);
  }
  if (m == "isdigit") return Value(AllAscii(s, ::isdigit));
  if (m == "isalpha") return Value(AllAscii(s, ::isalpha));
  if (m == "isalnum") return Value(AllAscii(s, ::isalnum));
  if (m == "isspace") {
    std::u32string u = DecodeUtf8(s);
    return Value(!u.empty() && std::all_of(u.begin(), u.end(), PyIsSpace));
  }
  if (m == "islower" || m == "isupper") {
    bool cased = false;
    for (unsigned char c : s) {
      if (std::isalpha(c)) {
        cased = true;
        if ((m == "islower") != (std::islower(c) != 0)) return Value(false);
      }
    }
    return Value(cased);
  }
  return Status::DataError("str." + m + "() is not supported");
}

Result<Value> CallDictMethod(const Value& obj, const std::string& m, std::vector<Value>& args, Kwargs& kwargs) {
  const Json& d = obj.data();
  if (!kwargs.empty()) return ArgError(m, "takes no keyword arguments");
  if (m == "get") {
    if (args.empty() || args.size() > 2) return ArgError(m, "takes 1 or 2 arguments");
    if (args[0].is_string()) {
      auto it = d.find(args[0].str());
      if (it != d.end()) return obj.Child(*it);
    }
    return args.size() == 2 ? args[1] : Value(Json(nullptr));
  }
  if (!args.empty()) return ArgError(m, "takes no arguments");
  if (m == "copy") return obj;
  Json out = Json::array();
  for (const auto& [k, v] : d.items()) {
    if (m == "keys") out.push_back(k);
    else if (m == "values") out.push_back(v);
    else out.push_back(Json::array({k, v}));
  }
  return Value(out);
}

Result<Value> CallListMethod(const Value& obj, const std::string& m, std::vector<Value>& args, Kwargs& kwargs) {
  const Json& l = obj.data();
  if (!kwargs.empty()) return ArgError(m, "takes no keyword arguments");
  if (m == "copy") return obj;
  if (args.size() != 1) return ArgError(m, "takes exactly one argument");
  int64_t count = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    if (PyEquals(obj.Child(l[i]), args[0])) {
      if (m == "index") return Value(static_cast<int64_t>(i));
      ++count;
    }
  }
  if (m == "index") return Status::DataError(PyStr(args[0]) + " is not in list");
  return Value(count);
}

const std::set<std::string>& StrMethods() {
  static const std::set<std::string> k = {
      "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
      "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier",
      "islower", "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower",
      "lstrip", "maketrans", "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex",
      "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines", "startswith", "strip", "swapcase",
      "title", "translate", "upper", "zfill"};
  return k;
}

Value Unsafe(const Value& obj, const std::string& name) {
  return Value::Undefined("access to attribute '" + name + "' of '" + TypeName(obj) + "' object is unsafe.");
}

Value Bound(const Value& obj, const std::string& name) {
  std::string label = TypeName(obj) + "." + name;
  return Value::FromFunction(label, [obj, name](std::vector<Value>& args, Kwargs& kwargs) -> Result<Value> {
    const Json& d = obj.data();
    Result<Value> r = d.is_string() ? CallStrMethod(d.get_ref<const std::string&>(), name, args, kwargs)
                      : d.is_object() ? CallDictMethod(obj, name, args, kwargs)
                                      : CallListMethod(obj, name, args, kwargs);
    if (!r.ok()) return r.status().WithContext(TypeName(obj) + "." + name);
    return r;
  });
}

}  // namespace

int64_t AsInt64(const Json& j) {
  if (j.is_boolean()) return j.get<bool>() ? 1 : 0;
  if (j.is_number_unsigned()) return static_cast<int64_t>(j.get<uint64_t>());
  return j.get<int64_t>();
}

Result<Value> GetAttr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.kind() == Value::Kind::kObject) {
    Value v;
    if (obj.object()->Get(name, &v)) return v;
    return Value::Undefined("'" + TypeName(obj) + " object' has no attribute '" + name + "'");
  }
  if (!obj.is_data()) return Missing(obj, Value(name));
  const Json& d = obj.data();
  if (!name.empty() && name[0] == '_') {  // no Python attribute that is safe: a dict key or nothing
    if (d.is_object() && d.contains(name)) return obj.Child(d[name]);
    return Missing(obj, Value(name));
  }
  if (d.is_object()) {
    static const std::set<std::string> safe = {"get", "items", "keys", "values", "copy"};
    static const std::set<std::string> unsafe = {"pop", "popitem", "setdefault", "update", "clear", "fromkeys"};
    if (safe.count(name)) return Bound(obj, name);
    if (unsafe.count(name)) return Unsafe(obj, name);
    auto it = d.find(name);
    if (it != d.end()) return obj.Child(*it);
  } else if (d.is_string()) {
    if (StrMethods().count(name)) return Bound(obj, name);
  } else if (d.is_array()) {
    if (name == "count" || name == "index" || name == "copy") return Bound(obj, name);
    static const std::set<std::string> unsafe = {"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
    if (unsafe.count(name)) return Unsafe(obj, name);
  }
  return Missing(obj, Value(name));
}

Result<Value> GetItem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.kind() == Value::Kind::kList && key.is_data() && IsInt(key.data())) {
    int64_t i = AsInt64(key.data()), n = static_cast<int64_t>(obj.list()->size());
    if (i < 0) i += n;
    if (i >= 0 && i < n) return (*obj.list())[static_cast<size_t>(i)];
  }
  if (key.is_undefined()) return Missing(obj, key);
  if (obj.is_data() && key.is_data()) {
    const Json& d = obj.data();
    const Json& k = key.data();
    if (d.is_object() && k.is_string()) {
      auto it = d.find(k.get_ref<const std::string&>());
      if (it != d.end()) return obj.Child(*it);
    } else if ((d.is_array() || d.is_string()) && IsInt(k)) {
      int64_t i = AsInt64(k);
      if (d.is_array()) {
        int64_t n = static_cast<int64_t>(d.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return obj.Child(d[static_cast<size_t>(i)]);
      } else {
        std::u32string u = DecodeUtf8(d.get_ref<const std::string&>());
        int64_t n = static_cast<int64_t>(u.size());
        if (i < 0) i += n;
        if (i >= 0 && i < n) return Value(EncodeUtf8(u.substr(static_cast<size_t>(i), 1)));
      }
    }
  }
  if (key.is_string()) {
    RL_ASSIGN_OR_RETURN(Value attr, GetAttr(obj, key.str()));
    if (!attr.is_undefined()) return attr;
  }
  return Missing(obj, key);
}

namespace {

// PySlice_AdjustIndices: the positions a slice visits in a sequence of n items.
Result<std::vector<int64_t>> SlicePositions(int64_t n, const Value& start, const Value& stop, const Value& step) {
  auto bound = [](const Value& v, int64_t* out) -> Status {
    if (v.is_data() && v.data().is_null()) return Status::OK();
    if (!v.is_data() || !IsInt(v.data()))
      return Status::DataError("slice indices must be integers or None");
    *out = AsInt64(v.data());
    return Status::OK();
  };
  int64_t st = 1;
  RL_RETURN_IF_ERROR(bound(step, &st));
  if (st == 0) return Status::DataError("slice step cannot be zero");
  int64_t lo = st > 0 ? 0 : n - 1, hi = st > 0 ? n : -1;
  int64_t a = lo, b = hi;
  bool has_a = false, has_b = false;
  {
    int64_t x = 0;
    Value none(Json(nullptr));
    if (!(start.is_data() && start.data().is_null())) {
      RL_RETURN_IF_ERROR(bound(start, &x));
      a = x, has_a = true;
    }
    if (!(stop.is_data() && stop.data().is_null())) {
      RL_RETURN_IF_ERROR(bound(stop, &x));
      b = x, has_b = true;
    }
  }
  auto adjust = [&](int64_t v) {
    if (v < 0) {
      v += n;
      if (v < 0) v = st < 0 ? -1 : 0;
    } else if (v >= n) {
      v = st < 0 ? n - 1 : n;
    }
    return v;
  };
  if (has_a) a = adjust(a);
  if (has_b) b = adjust(b);
  std::vector<int64_t> pos;
  for (int64_t i = a; st > 0 ? i < b : i > b; i += st) pos.push_back(i);
  return pos;
}

}  // namespace

Result<Value> GetSlice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) return UndefinedError(obj);
  if (obj.is_data() && obj.data().is_array()) {
    const Json& d = obj.data();
    RL_ASSIGN_OR_RETURN(auto pos, SlicePositions(static_cast<int64_t>(d.size()), start, stop, step));
    Json out = Json::array();
    for (int64_t i : pos) out.push_back(d[static_cast<size_t>(i)]);
    return Value(out);
  }
  if (obj.is_string()) {
    std::u32string u = DecodeUtf8(obj.str()), out;
    RL_ASSIGN_OR_RETURN(auto pos, SlicePositions(static_cast<int64_t>(u.size()), start, stop, step));
    for (int64_t i : pos) out.push_back(u[static_cast<size_t>(i)]);
    return Value(EncodeUtf8(out));
  }
  return Value::Undefined("'" + ObjectTypeRepr(obj) + "' cannot be sliced");
}

Result<std::vector<Value>> Iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_undefined()) return out;
  if (v.kind() == Value::Kind::kList) return *v.list();
  if (v.is_data()) {
    const Json& d = v.data();
    if (d.is_array()) {
      for (const auto& e : d) out.push_back(v.Child(e));
      return out;
    }
    if (d.is_object()) {
      for (const auto& [k, e] : d.items()) out.emplace_back(Json(k));
      return out;
    }
    if (d.is_string()) {
      for (char32_t c : DecodeUtf8(d.get_ref<const std::string&>())) out.emplace_back(EncodeUtf8(std::u32string(1, c)));
      return out;
    }
  }
  return Status::DataError("'" + TypeName(v) + "' object is not iterable");
}

}  // namespace rl::chat::jinja
