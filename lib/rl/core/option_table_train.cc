// Options of rl-train, declared once (see option_table.cc for the shared ones).
#include "rl/core/options.h"

namespace rl {

void AppendTrainOptions(std::vector<OptionSpec>* table) {
  table->insert(table->end(), {
  });
}

}  // namespace rl
