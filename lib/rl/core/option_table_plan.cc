// Options of rl-profile plan, the pipeline simulator (lib/rl/profile/plan_cmd.h), declared once
// (see option_table.cc for the shared ones: --seed, --json).
#include "rl/core/options.h"

namespace rl {
void AppendPlanOptions(std::vector<OptionSpec>* table) {
  const std::vector<std::string> plan = {"rl-profile plan"};
  AddTools(table, "--micro-batch", plan);
  table->insert(table->end(), {
      {"--from", "", "run directory whose event logs give the per-role costs (fitted to them)", plan},
      {"--decode-profile", "",
       "decode profile (rl-profile adaptive --profile-out): generation costs per decode round from it", plan},
      {"--pool", "", "slots to split between rollouts, rewards and trainer ranks (default: the run's)", plan},
      {"--modes", "", "training modes to try: sync, semi-sync, async, async-kN", plan},
      {"--trainer-ranks", "", "trainer ranks to try, each taking a slot of the pool", plan},
      {"--sim-steps", "", "trainer steps simulated per configuration", plan},
      {"--warmup", "", "steps left out of the step time, at the start of a run or a simulation", plan},
      {"--cores", "",
       "jobs that run at full speed at once; n jobs on more run at cores/n each (default: this machine's cores)",
       plan},
      {"--check", "", "run directory of another configuration: its measured step time beside the prediction",
       plan},
  });
}

}  // namespace rl
