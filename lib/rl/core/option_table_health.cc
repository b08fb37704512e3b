// Options of heartbeats of every role, rl-watchdog and rl-profile report, declared once (see
// option_table.cc for the shared ones). Flags another table already declares with the same
// meaning (--json) get these tools added to their entry instead.
#include "rl/core/options.h"

namespace rl {
void AppendHealthOptions(std::vector<OptionSpec>* table) {
  AddTools(table, "--json", {"rl-watchdog"});
  const std::vector<std::string> roles = {"rl-queue serve", "rl-queue unit",  "rl-rollout run", "rl-reward run",
                                          "rl-train grpo",  "rl-train sft",   "rl-train score", "rl-watchdog"};
  table->insert(table->end(), {
      // Every role, and the endpoint rl-watchdog binds.
      {"--heartbeat", "RL_HEARTBEAT", "rl-watchdog heartbeat endpoint, e.g. tcp://127.0.0.1:5560 (empty: no heartbeats)",
       roles},
      {"--heartbeat-interval", "RL_HEARTBEAT_INTERVAL", "seconds between heartbeats", roles},

      // rl-watchdog
      {"--missed", "RL_WATCHDOG_MISSED", "heartbeats missed before a role is suspect", {"rl-watchdog"}},
      {"--stall-train", "RL_WATCHDOG_STALL_TRAIN",
       "seconds a trainer may make no progress in phase train before it is failed", {"rl-watchdog"}},
      {"--stall-rollout", "RL_WATCHDOG_STALL_ROLLOUT",
       "seconds a rollout holding leased work may produce nothing before it is probed", {"rl-watchdog"}},
      {"--probe-window", "RL_WATCHDOG_PROBE_WINDOW", "seconds a stall probe measures the role's CPU", {"rl-watchdog"}},
      {"--duration", "", "seconds to run before exiting 0 (0: until stopped)", {"rl-watchdog monitor", "rl-watchdog beat"}},
      {"--role", "", "role the stand-in heartbeats as: queue, rollout, reward, train, ...", {"rl-watchdog beat"}},
      {"--phase", "", "phase the stand-in reports, e.g. train, generate, waiting-for-data", {"rl-watchdog beat"}},
      {"--progress-every", "", "seconds between moves of the stand-in's progress counter (0: it never moves)",
       {"rl-watchdog beat"}},
      {"--step-every", "", "seconds between steps of the stand-in (0: its step never moves)", {"rl-watchdog beat"}},
      {"--stop-delay", "",
       "seconds the stand-in goes on heartbeating after a stop signal before it exits (a role slow to stop)",
       {"rl-watchdog beat"}},
      {"--restart", "RL_WATCHDOG_RESTART",
       "what a failure restarts: role (the failed role only, escalating) or job (everything, every time)",
       {"rl-watchdog run"}},

      // rl-profile report
      {"--svg", "", "write the timeline picture to this SVG file", {"rl-profile report"}},
  });
}

}  // namespace rl
