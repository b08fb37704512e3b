// Fail: how a tool ends on an error, the same for every tool. One line "TOOL: message" on stderr
// and the sysexits code of the status (ExitCodeFor, status.h). A tool's command function ends
// with `return Fail("rl-train", s);`.
// Thread safety: reentrant (std::cerr).
#pragma once

#include <string_view>

#include "rl/core/status.h"

namespace rl {

int Fail(std::string_view tool, const Status& status);

}  // namespace rl
