// Jinja's operators with Python's semantics: + - * / // % ** on ints (64-bit; overflow is an
// error where Python would grow), floats and bools (which are ints), + on strings and lists,
// * repeating them, ~ concatenating str() of both sides, and the comparisons. An Undefined
// operand is an error, as in Jinja. String % formatting is not supported.
// Thread safety: pure functions.
#pragma once

#include <string>

#include "rl/core/status.h"
#include "rl/model/chat/jinja_value.h"

namespace rl::chat::jinja {

// Strings and lists that + or * would make longer than this are an error.
inline constexpr size_t kMaxValueBytes = 16u << 20;

// op: + - * / // % ** ~
Result<Value> BinaryOp(const std::string& op, const Value& a, const Value& b);
// op: - or +
Result<Value> UnaryOp(const std::string& op, const Value& a);
// op: == != < <= > >= in notin
Result<bool> CompareOp(const std::string& op, const Value& a, const Value& b);

}  // namespace rl::chat::jinja
