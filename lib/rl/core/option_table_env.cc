// Options of rl-env (the tool sandbox role, lib/rl/env), declared once (see option_table.cc for
// the shared ones). Flags declared elsewhere with the same meaning (--bind, --run-dir, --id,
// --log-level, the heartbeat flags) get rl-env added to their entry instead.
#include "rl/core/options.h"

namespace rl {
void AppendEnvOptions(std::vector<OptionSpec>* table) {
  AddTools(table, "--log-level", {"rl-env"});
  for (const char* flag : {"--run-dir", "--id", "--heartbeat", "--heartbeat-interval"}) {
    AddTools(table, flag, {"rl-env serve"});
  }
  const std::string serve = "rl-env serve", call = "rl-env call";
  table->insert(table->end(), {
      // An entry of its own: one environment file may configure rl-queue and rl-env together.
      {"--bind", "RL_ENV_BIND", "endpoint serve listens on, e.g. tcp://127.0.0.1:5570", {serve}},
      {"--cpu-s", "RL_ENV_CPU_S",
       "RLIMIT_CPU of each tool process over its life, a backstop for spinning outside calls (0: none)", {serve}},
      {"--endpoint", "RL_ENV_ENDPOINT", "rl-env endpoint to call, e.g. tcp://127.0.0.1:5570", {call}},
      {"--give-up-s", "RL_ENV_GIVE_UP_S", "seconds to keep retrying while rl-env does not answer before exiting 69",
       {call}},
      {"--max-output-bytes", "RL_ENV_MAX_OUTPUT_BYTES",
       "most bytes a tool may write in reply to one call; more and it is killed (too-large)", {serve}},
      {"--memory-mb", "RL_ENV_MEMORY_MB", "address-space limit (RLIMIT_AS) of each tool process in MiB (0: none)",
       {serve}},
      {"--no-network", "RL_ENV_NO_NETWORK",
       "run tools without network: try (when the kernel allows it), require (else exit 69), off", {serve}},
      {"--timeout-ms", "RL_ENV_TIMEOUT_MS",
       "wall time of one tool call in ms: serve kills a tool past it (timeout); call waits for it", {serve, call}},
      {"--tool", "", "a tool: NAME=COMMAND, run as /bin/sh -c COMMAND, speaking JSON lines (repeatable)", {serve}},
      {"--workers", "RL_ENV_WORKERS", "calls run at once: each worker owns one process of each tool", {serve}},
  });
}

}  // namespace rl
