// `rl-profile colocation`: the subcommand around RunColocation (colocation.h), added to
// rl-profile's table from tools/rl-profile/main.cc (the rl library cannot link libtorch).
// Thread safety: single-threaded setup.
#pragma once

#include "rl/profile/cli.h"

namespace rl::reward {

// Binds the subcommand's options on `cl`; its run() returns the exit code.
profile::Subcommand AddColocationProfile(CommandLine& cl);

}  // namespace rl::reward
