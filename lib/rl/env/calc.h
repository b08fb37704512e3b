// The calculator rl-env ships as a tool (`rl-env calc`, `--tool calc="rl-env calc"`).
//
// EvalIntExpression evaluates an integer expression exactly: decimal literals, + - * / %,
// parentheses, unary minus and plus, spaces anywhere between tokens. * / % bind tighter than
// + -, and operators of one level group from the left. Division truncates toward zero (7/2 = 3,
// -7/2 = -3) and % takes the sign of the dividend, as in C. Every step is checked in int64:
//   "overflow"                 a literal or a result outside int64
//   "division by zero"         / or % by 0
//   "cannot parse ...: WHY at offset N"   anything else (also nesting deeper than 200)
// RunCalcTool speaks rl-env's tool protocol (man rl-env, TOOL PROTOCOL) on a pair of streams.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <string_view>

#include "rl/core/status.h"

namespace rl::env {

// DataError with the message the tool replies with ("overflow", "division by zero", "cannot parse ...").
Result<int64_t> EvalIntExpression(std::string_view text);

// One reply line (no newline) for one request line: {"output": "408"} or {"error": "..."}.
// arguments: a string, or an object {"expression": string}.
std::string CalcReply(const std::string& request_line);

// Answers each line of `in` on `out`, flushing each reply; blank lines get none. Returns 0 at the
// end of `in`.
int RunCalcTool(std::istream& in, std::ostream& out);

}  // namespace rl::env
