// rl-profile report RUN_DIR: ETTR, time lost per fault, the per-step breakdown and the timeline
// picture of a run, from its event logs (ettr.h, timeline_svg.h). A table for people, JSON
// lines with --json.
#pragma once

#include <ostream>
#include <string>

#include "rl/core/options.h"
#include "rl/profile/cli.h"
#include "rl/profile/ettr.h"

namespace rl::profile {

// Binds the subcommand on `cl`; the returned run() prints the report on stdout.
Subcommand AddReportCommand(CommandLine& cl);

void PrintReport(const EttrReport& r, const std::string& run_dir, bool json, std::ostream& out);

}  // namespace rl::profile
