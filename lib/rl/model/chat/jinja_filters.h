// Jinja's filters and tests that chat templates use, with Jinja 3.1's semantics, and tojson as
// transformers overrides it: json.dumps(x, ensure_ascii=False, indent=None, separators=None,
// sort_keys=False) with those four as its parameters (positional too), so keys keep their order
// and nothing is HTML-escaped.
//
// Filters: abs capitalize count d default e escape first float indent int items join last length
// list lower map reject rejectattr replace reverse safe select selectattr sort string title tojson
// trim upper. select/reject/selectattr/rejectattr/map/reverse give lists where Jinja gives
// generators (they print differently, and length accepts them).
// Tests: boolean callable defined divisibleby eq equalto escaped even false filter float ge gt in
// integer iterable le lower lt mapping ne none number odd sameas sequence string test true
// undefined upper, and the operators == != < <= > >= as test names.
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/chat/jinja_value.h"

namespace rl::chat::jinja {

bool IsKnownFilter(const std::string& name);
bool IsKnownTest(const std::string& name);
Result<Value> ApplyFilter(const std::string& name, const Value& input, std::vector<Value>& args, Kwargs& kwargs);
Result<bool> ApplyTest(const std::string& name, const Value& v, std::vector<Value>& args);
// `a in b` as Python evaluates it.
Result<bool> Contains(const Value& container, const Value& item);

}  // namespace rl::chat::jinja
