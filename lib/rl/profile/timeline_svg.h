// The timeline picture of rl-profile report: an SVG with one lane per role instance (each event
// log but the watchdog's), the phases as coloured bars, the trainer's steps as ticks, each fault
// as a red line at the fault with a shaded span until the role was ready again, and each layout
// switch of a rollout group (tensor-parallel degree) as a magenta tick where it began.
// Thread safety: reentrant.
#pragma once

#include <string>

#include "rl/profile/ettr.h"
#include "rl/profile/report_events.h"

namespace rl::profile {

std::string TimelineSvg(const RunEvents& run, const EttrReport& report);

}  // namespace rl::profile
