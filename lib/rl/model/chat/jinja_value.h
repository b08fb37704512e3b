// Values of the Jinja interpreter: JSON data (what messages and tools are), Jinja's Undefined,
// objects (namespace(), the loop variable) and callables (macros, globals, bound methods), with
// Python's semantics for truth, str(), repr(), ==, < and json.dumps.
//
// JSON objects keep their key order (nlohmann::ordered_json) because Python dicts do, and tojson
// prints them in that order. A tuple is a JSON array here (it prints as [..], Python's as (..)).
// Thread safety: values; an object is shared between copies of a Value and is not locked.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "rl/core/status.h"

namespace rl::chat::jinja {

using Json = nlohmann::ordered_json;

class Value;
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Function = std::function<Result<Value>(std::vector<Value>& args, Kwargs& kwargs)>;

// namespace() objects and the loop variable (whose attributes are computed from its position).
struct Object {
  enum class Type { kNamespace, kLoop };
  Type type = Type::kNamespace;
  std::vector<std::pair<std::string, std::shared_ptr<Value>>> attrs;  // namespace: insertion order
  size_t index = 0;                                                   // loop: the position
  std::shared_ptr<const std::vector<Value>> items;                    // loop: what it visits
  // The attribute, or false when there is none.
  bool Get(const std::string& name, Value* out) const;
  void Set(const std::string& name, Value v);
};

struct Callable {
  std::string name;
  Function fn;
};

class Value {
 public:
  // kList: a list holding a value that is not data (Undefined, a namespace); lists of data are
  // kData arrays. MakeList chooses.
  enum class Kind { kUndefined, kData, kObject, kCallable, kList };

  Value() = default;  // undefined
  Value(Json data)  // NOLINT: implicit by design
      : kind_(Kind::kData), root_(std::make_shared<const Json>(std::move(data))), ptr_(root_.get()) {}
  // A node inside this value's data, sharing it instead of copying: node must live in data().
  Value Child(const Json& node) const {
    Value v;
    v.kind_ = Kind::kData;
    v.root_ = root_;
    v.ptr_ = &node;
    return v;
  }
  static Value Undefined(std::string hint) {
    Value v;
    v.hint_ = std::move(hint);
    return v;
  }
  static Value FromObject(std::shared_ptr<Object> o);
  static Value FromFunction(std::string name, Function fn);
  static Value MakeList(std::vector<Value> items);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_data() const { return kind_ == Kind::kData; }
  bool is_string() const { return is_data() && ptr_->is_string(); }
  const Json& data() const { return *ptr_; }  // null when not data
  const std::string& str() const { return ptr_->get_ref<const std::string&>(); }
  // Why an undefined value is undefined: "'x' is undefined", "'dict object' has no attribute 'y'".
  const std::string& hint() const { return hint_; }
  const std::shared_ptr<Object>& object() const { return object_; }
  const std::shared_ptr<Callable>& callable() const { return callable_; }
  const std::shared_ptr<const std::vector<Value>>& list() const { return list_; }

 private:
  static const Json kNull;
  Kind kind_ = Kind::kUndefined;
  std::shared_ptr<const Json> root_;  // shared, never modified: copies of a Value are cheap
  const Json* ptr_ = &kNull;
  std::string hint_;
  std::shared_ptr<Object> object_;
  std::shared_ptr<Callable> callable_;
  std::shared_ptr<const std::vector<Value>> list_;
};

// The error Jinja raises when an undefined value is used for more than printing or testing.
Status UndefinedError(const Value& v);
// Python's type name of a value, for messages: 'str', 'int', 'dict', 'NoneType', 'Undefined'.
std::string TypeName(const Value& v);
bool IsNumber(const Json& j);  // int or float, bool excluded
bool IsInt(const Json& j);     // int or bool (a Python bool is an int)
bool Truthy(const Value& v);
// str(v) as Jinja prints it: None, True, 1.0, strings bare, lists and dicts as Python reprs.
std::string PyStr(const Value& v);
std::string PyRepr(const Json& j);
bool PyEquals(const Value& a, const Value& b);
// a < b for numbers, strings and lists; other pairs are Python's TypeError.
Result<bool> PyLess(const Value& a, const Value& b);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;                 // the indent string (an int indent n is n spaces)
  std::string item_separator = ", ";  // json.dumps chooses "," when an indent is given
  std::string key_separator = ": ";
  bool sort_keys = false;
};
// Python's json.dumps; a value that is not data is TypeError.
Result<std::string> PyJsonDumps(const Value& v, const JsonDumpOptions& options);

}  // namespace rl::chat::jinja
