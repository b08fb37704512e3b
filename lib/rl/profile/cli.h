// rl-profile's command line. ProfileMain parses argv through the option registry, runs one
// subcommand and returns the process exit code (sysexits). Subcommands: queue (the rl-queue
// benchmark, queue_profile.h), which exits 70 when a queue under test lost or duplicated a row
// (or a phase ran out of time), after printing its figures.
#pragma once

#include <functional>

#include "rl/core/options.h"
#include "rl/profile/queue_profile.h"

namespace rl::profile {

// A subcommand that lives in files of its own: Add* binds its options on `app`, and `run` is
// called when it was the one parsed. ProfileMain lists them in kSubcommands (cli.cc).
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

// Adds a subcommand from a library the rl library cannot link (decode needs libtorch).
using SubcommandFactory = std::function<Subcommand(CommandLine&)>;

int ProfileMain(int argc, char** argv, const ProfileHooks& hooks, const std::vector<SubcommandFactory>& extra = {});

}  // namespace rl::profile
