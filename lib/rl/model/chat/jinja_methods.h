// Attribute and item access as Jinja's ImmutableSandboxedEnvironment does it, and the Python
// methods templates call on strings, dicts and lists.
//
// obj.name tries a Python attribute first (a method), then obj["name"]; obj[key] tries the item
// first, then the attribute. A miss is Undefined with Jinja's reason ("'dict object' has no
// attribute 'x'"); any access on Undefined is an error. Methods that modify (list.append,
// dict.update, ...) are unsafe in the immutable sandbox: they come back Undefined, so calling
// them fails.
// Methods: str: strip lstrip rstrip split rsplit splitlines startswith endswith replace upper
// lower title capitalize find rfind count join format removeprefix removesuffix isdigit isalpha
// isalnum isspace islower isupper; dict: get items keys values copy; list: count index copy.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "rl/core/status.h"
#include "rl/model/chat/jinja_value.h"

namespace rl::chat::jinja {

Result<Value> GetAttr(const Value& obj, const std::string& name);
Result<Value> GetItem(const Value& obj, const Value& key);
// obj[start:stop:step] on a string or a list; unset bounds are null values.
Result<Value> GetSlice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// The items a for loop visits: a list's items, a dict's keys, a string's characters; nothing
// for Undefined.
Result<std::vector<Value>> Iterate(const Value& v);
// Python's int(x) of an integer-valued JSON number or bool.
int64_t AsInt64(const Json& j);

}  // namespace rl::chat::jinja
