// Renders a parsed Jinja template (jinja_parser) with variables, as Jinja's sandboxed
// environment does with its default Undefined (prints as "", is falsy, iterates as empty; any
// other use is an error).
//
// Scoping follows Jinja: a for loop's body gets a fresh scope on each iteration (a `set`
// inside it is gone after the iteration; namespace() objects carry state out), `if` bodies
// share the enclosing scope, macros see their arguments and the template's top level.
// Globals: range (at most 100000 items, as Jinja's sandbox), dict, namespace; the caller adds
// more (chat_template adds raise_exception and strftime_now).
// Sandbox bounds: output, macro recursion and the total number of loop iterations are limited;
// going past one is a DataError, never a crash.
// Thread safety: Render may run on many threads at once over one shared Template.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/chat/jinja_ast.h"

namespace rl::chat::jinja {

struct RenderLimits {
  size_t max_output_bytes = 16u << 20;
  int max_call_depth = 64;                     // nested macro calls
  int64_t max_loop_iterations = 10'000'000;    // all loops of one render together
};

using Variables = std::vector<std::pair<std::string, Value>>;

// Errors (an undefined value misused, a type error, raise_exception) are DataErrors whose
// message starts with "line N: ", N the template line.
Result<std::string> Render(const Template& tpl, const Variables& vars, const RenderLimits& limits);

}  // namespace rl::chat::jinja
