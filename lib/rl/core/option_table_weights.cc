// Options of rl-relay and the weight transfer options of rl-train, rl-rollout and rl-profile weights,
// declared once (see option_table.cc for the shared ones).
#include "rl/core/options.h"

namespace rl {

void AppendWeightsOptions(std::vector<OptionSpec>* table) {
  (void)table;  // none yet
}

}  // namespace rl
