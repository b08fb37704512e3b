// rl-profile report RUN_DIR: ETTR, time lost per fault, the per-step breakdown and the timeline
// picture of a run, from its event logs (ettr.h, timeline_svg.h), and the layout switches of its
// rollout groups. A table for people, JSON lines with --json. A run without a trainer (a rollout
// measured alone) gets its timeline and layouts, and no ETTR.
#pragma once

#include <ostream>
#include <string>

#include "rl/core/options.h"
#include "rl/profile/cli.h"
#include "rl/profile/ettr.h"

namespace rl::profile {

// Binds the subcommand on `cl`; the returned run() prints the report on stdout.
Subcommand AddReportCommand(CommandLine& cl);

// With r.trainer empty (UntimedReport), the lanes and layouts alone.
void PrintReport(const EttrReport& r, const RunEvents& run, const std::string& run_dir, bool json, std::ostream& out);

}  // namespace rl::profile
