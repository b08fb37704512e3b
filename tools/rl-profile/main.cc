// rl-profile: measurements of roleflow (benchmarks, event-log analysis). See man/rl-profile.1.
#include "rl/core/compute_process.h"
#include "rl/profile/cli.h"
#include "rl/profile/redis/redis_driver.h"
#ifdef RL_PROFILE_WITH_MODEL
#include "rl/dist/adaptive_profile.h"
#include "rl/reward/colocation_cmd.h"
#include "rl/train/decode_profile.h"
#endif

int main(int argc, char** argv) {
  rl::PrepareComputeProcess(argv);  // passive OpenMP, malloc that reuses large blocks
  rl::profile::ProfileHooks hooks;
  hooks.redis_drivers = rl::profile::RedisDrivers;
  std::vector<rl::profile::SubcommandFactory> extra;
#ifdef RL_PROFILE_WITH_MODEL
  extra.push_back(rl::train::AddDecodeProfile);
  extra.push_back(rl::dist::AddAdaptiveProfile);
  extra.push_back(rl::reward::AddColocationProfile);  // partial vs full colocation of a judge
#endif
  return rl::profile::ProfileMain(argc, argv, hooks, extra);
}
