// rl-profile: measurements of roleflow (benchmarks, event-log analysis). See man/rl-profile.1.
#include "rl/profile/cli.h"
#include "rl/profile/redis/redis_driver.h"

int main(int argc, char** argv) {
  rl::profile::ProfileHooks hooks;
  hooks.redis_drivers = rl::profile::RedisDrivers;
  return rl::profile::ProfileMain(argc, argv, hooks);
}
