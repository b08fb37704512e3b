// Printf: printf formatting into a std::string, for the tables the tools print (rl-profile report
// and plan). Lines longer than 511 bytes are cut there.
// Thread safety: reentrant.
#pragma once

#include <string>

namespace rl {

std::string Printf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace rl
