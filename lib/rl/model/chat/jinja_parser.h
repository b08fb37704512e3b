// Jinja's parser: tokens (jinja_lexer) to a syntax tree (jinja_ast), with Jinja's grammar and
// operator precedence, lowest first:
//   a if c else b  |  or  |  and  |  not  |  == != < <= > >= in, not in (chained)  |  + -  |  ~
//   |  * / // %  |  **  |  unary - +  |  filters (|f), tests (is t), calls, .attr, [sub]
// Statements: if/elif/else, for (tuple targets, inline if, else), set (name, tuple, ns.attr,
// block form with filters), macro, call, filter, with, break, continue, generation (as
// transformers' AssistantTracker defines it: renders its body), raw (in the lexer).
// Unknown tags are errors at parse time; unknown filters and tests too, except inside an if
// statement or an inline if, where Jinja only fails when they are evaluated.
// Thread safety: pure function.
#pragma once

#include <memory>
#include <string>

#include "rl/core/status.h"
#include "rl/model/chat/jinja_ast.h"

namespace rl::chat::jinja {

// Nesting deeper than this (blocks or expressions) is a DataError, not a stack overflow.
inline constexpr int kMaxParseDepth = 128;

// A syntax error is a DataError "line N: ...".
Result<std::shared_ptr<const Template>> Parse(const std::string& source);

}  // namespace rl::chat::jinja
