// rl-profile's command line. ProfileMain parses argv through the option registry, runs one
// subcommand and returns the process exit code (sysexits). Subcommands: queue (the rl-queue
// benchmark, queue_profile.h).
#pragma once

#include "rl/profile/queue_profile.h"

namespace rl::profile {

int ProfileMain(int argc, char** argv, const ProfileHooks& hooks);

}  // namespace rl::profile
