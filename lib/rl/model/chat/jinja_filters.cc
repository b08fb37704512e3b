#include "rl/model/chat/jinja_filters.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "rl/model/chat/jinja_methods.h"
#include "rl/model/chat/jinja_text.h"

namespace rl::chat::jinja {
namespace {

// The filter's arguments bound to its parameters (after the input), Python-style.
Result<std::vector<Value>> Bind(const std::string& f, std::vector<Value>& args, Kwargs& kwargs,
                                const std::vector<std::string>& names, const std::vector<Value>& defaults) {
  if (args.size() > names.size())
    return Status::DataError("filter '" + f + "' takes at most " + std::to_string(names.size()) + " arguments");
  std::vector<Value> out = args;
  std::vector<bool> set(names.size(), false);
  for (size_t i = 0; i < out.size(); ++i) set[i] = true;
  out.resize(names.size());
  for (size_t i = args.size(); i < names.size(); ++i) out[i] = defaults[i];
  for (auto& [k, v] : kwargs) {
    auto it = std::find(names.begin(), names.end(), k);
    if (it == names.end()) return Status::DataError("filter '" + f + "' got an unexpected keyword argument '" + k + "'");
    size_t i = it - names.begin();
    if (set[i]) return Status::DataError("filter '" + f + "' got multiple values for argument '" + k + "'");
    out[i] = v;
    set[i] = true;
  }
  return out;
}

bool IsNone(const Value& v) { return v.is_data() && v.data().is_null(); }

Result<Value> Length(const Value& v) {
  if (v.is_undefined()) return Value(int64_t{0});
  if (v.kind() == Value::Kind::kList) return Value(static_cast<int64_t>(v.list()->size()));
  if (v.is_data()) {
    const Json& d = v.data();
    if (d.is_string()) return Value(static_cast<int64_t>(CodePointCount(d.get_ref<const std::string&>())));
    if (d.is_array() || d.is_object()) return Value(static_cast<int64_t>(d.size()));
  }
  return Status::DataError("object of type '" + TypeName(v) + "' has no len()");
}

// The value at a dotted attribute path ("function.name", "0"), as Jinja's make_attrgetter.
Result<Value> AttrPath(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return GetItem(item, attribute);
  Value cur = item;
  for (const std::string& part : PySplit(attribute.str(), std::string("."), -1, false)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    RL_ASSIGN_OR_RETURN(cur, GetItem(cur, digits ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part)));
  }
  return cur;
}

Result<bool> Passes(const Value& v, std::vector<Value>& rest) {
  if (rest.empty()) return Truthy(v);
  if (!rest[0].is_string()) return Status::DataError("test name must be a string");
  std::string test = rest[0].str();
  if (!IsKnownTest(test)) return Status::DataError("no test named '" + test + "'");
  std::vector<Value> targs(rest.begin() + 1, rest.end());
  return ApplyTest(test, v, targs);
}

Result<Value> Select(const std::string& f, const Value& seq, std::vector<Value>& args) {
  bool by_attr = f == "selectattr" || f == "rejectattr";
  bool keep_if = f == "select" || f == "selectattr";
  if (by_attr && args.empty()) return Status::DataError(f + " needs an attribute name");
  std::vector<Value> rest(args.begin() + (by_attr ? 1 : 0), args.end());
  RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(seq));
  std::vector<Value> out;
  for (const Value& item : items) {
    Value probe = item;
    if (by_attr) {
      RL_ASSIGN_OR_RETURN(probe, AttrPath(item, args[0]));
    }
    RL_ASSIGN_OR_RETURN(bool ok, Passes(probe, rest));
    if (ok == keep_if) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Result<Value> Map(const Value& seq, std::vector<Value>& args, Kwargs& kwargs) {
  RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(seq));
  std::vector<Value> out;
  bool by_attr = args.empty();
  Value attribute, def;
  for (auto& [k, v] : kwargs) {
    if (!by_attr) break;
    if (k == "attribute") attribute = v;
    else if (k == "default") def = v;
    else return Status::DataError("map got an unexpected keyword argument '" + k + "'");
  }
  if (by_attr && attribute.is_undefined()) return Status::DataError("map needs a filter name or attribute=");
  for (const Value& item : items) {
    Value r;
    if (by_attr) {
      RL_ASSIGN_OR_RETURN(r, AttrPath(item, attribute));
      if (r.is_undefined() && !def.is_undefined()) r = def;
    } else {
      if (!args[0].is_string()) return Status::DataError("map: the filter name must be a string");
      std::string name = args[0].str();
      if (!IsKnownFilter(name)) return Status::DataError("no filter named '" + name + "'");
      std::vector<Value> fargs(args.begin() + 1, args.end());
      Kwargs fkw = kwargs;
      RL_ASSIGN_OR_RETURN(r, ApplyFilter(name, item, fargs, fkw));
    }
    out.push_back(std::move(r));
  }
  return Value::MakeList(std::move(out));
}

Result<Value> ToJson(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  Value none(Json(nullptr));
  RL_ASSIGN_OR_RETURN(auto p, Bind("tojson", args, kwargs, {"ensure_ascii", "indent", "separators", "sort_keys"},
                                   {Value(false), none, none, Value(false)}));
  JsonDumpOptions o;
  o.ensure_ascii = Truthy(p[0]);
  o.sort_keys = Truthy(p[3]);
  if (!IsNone(p[1])) {
    o.has_indent = true;
    o.item_separator = ",";
    if (p[1].is_string()) o.indent = p[1].str();
    else if (p[1].is_data() && IsInt(p[1].data())) o.indent = std::string(std::max<int64_t>(0, AsInt64(p[1].data())), ' ');
    else return Status::DataError("tojson: indent must be an int or a string");
  }
  if (!IsNone(p[2])) {
    const Value& s = p[2];
    if (!s.is_data() || !s.data().is_array() || s.data().size() != 2 || !s.data()[0].is_string() || !s.data()[1].is_string())
      return Status::DataError("tojson: separators must be a pair of strings");
    o.item_separator = s.data()[0].get<std::string>();
    o.key_separator = s.data()[1].get<std::string>();
  }
  RL_ASSIGN_OR_RETURN(std::string text, PyJsonDumps(v, o));
  return Value(text);
}

// Python's int(str) after strip: sign, digits, single underscores between digits.
std::optional<int64_t> ParsePyInt(const std::string& raw) {
  std::string s = PyStrip(raw, std::nullopt, true, true), digits;
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
  for (; i < s.size(); ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i]))) digits.push_back(s[i]);
    else if (s[i] == '_' && !digits.empty() && i + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[i + 1]))) continue;
    else return std::nullopt;
  }
  if (digits.empty()) return std::nullopt;
  try {
    return neg ? -std::stoll(digits) : std::stoll(digits);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> ParsePyFloat(const std::string& raw) {
  std::string t = PyStrip(raw, std::nullopt, true, true), s;
  for (size_t i = 0; i < t.size(); ++i) {  // underscores only between digits, as Python's float()
    if (t[i] != '_') {
      s.push_back(t[i]);
      continue;
    }
    if (i == 0 || i + 1 == t.size() || !std::isdigit(static_cast<unsigned char>(t[i - 1])) ||
        !std::isdigit(static_cast<unsigned char>(t[i + 1])))
      return std::nullopt;
  }
  if (s.empty() || s.find_first_of("xXpP") != std::string::npos) return std::nullopt;
  size_t used = 0;
  try {
    double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

Result<Value> ToInt(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  RL_ASSIGN_OR_RETURN(auto p, Bind("int", args, kwargs, {"default", "base"}, {Value(int64_t{0}), Value(int64_t{10})}));
  if (v.is_data()) {
    const Json& d = v.data();
    if (IsInt(d)) return Value(AsInt64(d));
    std::optional<double> f;
    if (d.is_number_float()) f = d.get<double>();
    if (d.is_string()) {
      if (auto i = ParsePyInt(d.get_ref<const std::string&>())) return Value(*i);
      f = ParsePyFloat(d.get_ref<const std::string&>());
    }
    if (f && std::isfinite(*f)) {
      if (std::fabs(*f) >= 9.2e18) return Status::DataError("int: value out of range");
      return Value(static_cast<int64_t>(std::trunc(*f)));
    }
    if (f && std::isinf(*f)) return Status::DataError("cannot convert float infinity to integer");
  }
  return p[0];
}

Result<Value> ToFloat(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  RL_ASSIGN_OR_RETURN(auto p, Bind("float", args, kwargs, {"default"}, {Value(0.0)}));
  if (v.is_data()) {
    const Json& d = v.data();
    if (d.is_boolean()) return Value(d.get<bool>() ? 1.0 : 0.0);
    if (d.is_number()) return Value(d.get<double>());
    if (d.is_string())
      if (auto f = ParsePyFloat(d.get_ref<const std::string&>())) return Value(*f);
  }
  return p[0];
}

Result<Value> FirstOrLast(const Value& v, bool first) {
  RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  if (items.empty()) return Value::Undefined(first ? "No first item, sequence was empty." : "No last item, sequence was empty.");
  return first ? items.front() : items.back();
}

Result<Value> Join(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  RL_ASSIGN_OR_RETURN(auto p, Bind("join", args, kwargs, {"d", "attribute"}, {Value(""), Value(Json(nullptr))}));
  RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::string sep = PyStr(p[0]), out;
  for (size_t i = 0; i < items.size(); ++i) {
    Value item = items[i];
    if (!IsNone(p[1])) {
      RL_ASSIGN_OR_RETURN(item, AttrPath(item, p[1]));
    }
    if (i) out += sep;
    out += PyStr(item);
  }
  return Value(out);
}

Result<Value> Sort(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  RL_ASSIGN_OR_RETURN(auto p, Bind("sort", args, kwargs, {"reverse", "case_sensitive", "attribute"},
                                   {Value(false), Value(false), Value(Json(nullptr))}));
  RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
  std::vector<std::pair<Value, Value>> keyed;
  for (const Value& item : items) {
    Value key = item;
    if (!IsNone(p[2])) {
      RL_ASSIGN_OR_RETURN(key, AttrPath(item, p[2]));
    }
    if (!Truthy(p[1]) && key.is_string()) key = Value(AsciiLower(key.str()));
    keyed.emplace_back(key, item);
  }
  Status err;
  bool reverse = Truthy(p[0]);
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& a, const auto& b) {
    auto r = reverse ? PyLess(b.first, a.first) : PyLess(a.first, b.first);
    if (!r.ok()) {
      if (err.ok()) err = r.status();
      return false;
    }
    return r.value();
  });
  RL_RETURN_IF_ERROR(err);
  std::vector<Value> out;
  for (auto& [k, item] : keyed) out.push_back(std::move(item));
  return Value::MakeList(std::move(out));
}

Result<Value> Indent(const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  RL_ASSIGN_OR_RETURN(auto p, Bind("indent", args, kwargs, {"width", "first", "blank"},
                                   {Value(int64_t{4}), Value(false), Value(false)}));
  std::string ind;
  if (p[0].is_string()) ind = p[0].str();
  else if (p[0].is_data() && IsInt(p[0].data())) ind = std::string(std::max<int64_t>(0, AsInt64(p[0].data())), ' ');
  else return Status::DataError("indent: width must be an int or a string");
  std::vector<std::string> lines = PySplitLines(PyStr(v) + "\n", false);
  std::string rv;
  if (Truthy(p[2])) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i];
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].empty() ? "" : ind + lines[i]);
  }
  if (Truthy(p[1])) rv = ind + rv;
  return Value(rv);
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

Result<Value> NoArgs(const std::string& f, std::vector<Value>& args, Kwargs& kwargs, Value v) {
  if (!args.empty() || !kwargs.empty()) return Status::DataError("filter '" + f + "' takes no arguments");
  return v;
}

}  // namespace

bool IsKnownFilter(const std::string& name) {
  static const char* kNames[] = {"abs", "capitalize", "count", "d", "default", "e", "escape", "first",
                                 "float", "indent", "int", "items", "join", "last", "length", "list",
                                 "lower", "map", "reject", "rejectattr", "replace", "reverse", "safe",
                                 "select", "selectattr", "sort", "string", "title", "tojson", "trim", "upper"};
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

Result<Value> ApplyFilter(const std::string& f, const Value& v, std::vector<Value>& args, Kwargs& kwargs) {
  if (f == "length" || f == "count") {
    RL_ASSIGN_OR_RETURN(Value n, Length(v));
    return NoArgs(f, args, kwargs, n);
  }
  if (f == "default" || f == "d") {
    RL_ASSIGN_OR_RETURN(auto p, Bind(f, args, kwargs, {"default_value", "boolean"}, {Value(""), Value(false)}));
    if (v.is_undefined() || (Truthy(p[1]) && !Truthy(v))) return p[0];
    return v;
  }
  if (f == "trim") {
    RL_ASSIGN_OR_RETURN(auto p, Bind(f, args, kwargs, {"chars"}, {Value(Json(nullptr))}));
    std::optional<std::string> chars;
    if (!IsNone(p[0])) chars = PyStr(p[0]);
    return Value(PyStrip(PyStr(v), chars, true, true));
  }
  if (f == "upper") return NoArgs(f, args, kwargs, Value(AsciiUpper(PyStr(v))));
  if (f == "lower") return NoArgs(f, args, kwargs, Value(AsciiLower(PyStr(v))));
  if (f == "capitalize") return NoArgs(f, args, kwargs, Value(PyCapitalize(PyStr(v))));
  if (f == "title") return NoArgs(f, args, kwargs, Value(JinjaTitle(PyStr(v))));
  if (f == "string" || f == "safe") return NoArgs(f, args, kwargs, Value(PyStr(v)));
  if (f == "escape" || f == "e") return NoArgs(f, args, kwargs, Value(Escape(PyStr(v))));
  if (f == "first" || f == "last") {
    RL_ASSIGN_OR_RETURN(Value r, FirstOrLast(v, f == "first"));
    return NoArgs(f, args, kwargs, r);
  }
  if (f == "join") return Join(v, args, kwargs);
  if (f == "tojson") return ToJson(v, args, kwargs);
  if (f == "items") {
    if (v.is_undefined()) return Value(Json::array());
    if (!v.is_data() || !v.data().is_object()) return Status::DataError("Can only get item pairs from a mapping.");
    Json out = Json::array();
    for (const auto& [k, e] : v.data().items()) out.push_back(Json::array({k, e}));
    return NoArgs(f, args, kwargs, Value(out));
  }
  if (f == "list") {
    RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    return NoArgs(f, args, kwargs, Value::MakeList(std::move(items)));
  }
  if (f == "reverse") {
    if (v.is_string()) {
      std::u32string u = DecodeUtf8(v.str());
      std::reverse(u.begin(), u.end());
      return NoArgs(f, args, kwargs, Value(EncodeUtf8(u)));
    }
    if (!(v.is_data() && v.data().is_array()) && v.kind() != Value::Kind::kList)
      return Status::DataError("argument to reversed() must be a sequence");
    RL_ASSIGN_OR_RETURN(std::vector<Value> items, Iterate(v));
    return NoArgs(f, args, kwargs, Value::MakeList({items.rbegin(), items.rend()}));
  }
  if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr") {
    if (!kwargs.empty()) return Status::DataError("filter '" + f + "' takes no keyword arguments");
    return Select(f, v, args);
  }
  if (f == "map") return Map(v, args, kwargs);
  if (f == "int") return ToInt(v, args, kwargs);
  if (f == "float") return ToFloat(v, args, kwargs);
  if (f == "replace") {
    RL_ASSIGN_OR_RETURN(auto p, Bind(f, args, kwargs, {"old", "new", "count"}, {Value(), Value(), Value(Json(nullptr))}));
    if (p[0].is_undefined() || p[1].is_undefined()) return Status::DataError("replace needs old and new");
    int64_t count = -1;
    if (!IsNone(p[2])) {
      if (!p[2].is_data() || !IsInt(p[2].data())) return Status::DataError("replace: count must be an integer");
      count = AsInt64(p[2].data());
    }
    return Value(PyReplace(PyStr(v), PyStr(p[0]), PyStr(p[1]), count));
  }
  if (f == "abs") {
    if (!v.is_data() || !(v.data().is_number() || v.data().is_boolean()))
      return Status::DataError("bad operand type for abs(): '" + TypeName(v) + "'");
    if (v.data().is_number_float()) return Value(std::fabs(v.data().get<double>()));
    int64_t i = AsInt64(v.data());
    return NoArgs(f, args, kwargs, Value(i < 0 ? -i : i));
  }
  if (f == "sort") return Sort(v, args, kwargs);
  if (f == "indent") return Indent(v, args, kwargs);
  return Status::DataError("no filter named '" + f + "'");
}

}  // namespace rl::chat::jinja
