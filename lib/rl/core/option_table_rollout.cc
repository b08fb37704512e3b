// Options of rl-rollout and rl-reward, declared once (see option_table.cc for the shared ones).
#include "rl/core/options.h"

namespace rl {

void AppendRolloutOptions(std::vector<OptionSpec>* table) {
  table->insert(table->end(), {
  });
}

}  // namespace rl
