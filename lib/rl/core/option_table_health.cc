// Options of heartbeats of every role, rl-watchdog and rl-profile report,
// declared once (see option_table.cc for the shared ones).
#include "rl/core/options.h"

namespace rl {

void AppendHealthOptions(std::vector<OptionSpec>* table) {
  (void)table;  // none yet
}

}  // namespace rl
