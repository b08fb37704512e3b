// rl-profile's command line. ProfileMain parses argv through the option registry, runs one
// subcommand and returns the process exit code (sysexits). Subcommands: queue (the rl-queue
// benchmark, queue_profile.h), which exits 70 when a queue under test lost or duplicated a row
// (or a phase ran out of time), after printing its figures.
#pragma once

#include "rl/profile/queue_profile.h"

namespace rl::profile {

int ProfileMain(int argc, char** argv, const ProfileHooks& hooks);

}  // namespace rl::profile
