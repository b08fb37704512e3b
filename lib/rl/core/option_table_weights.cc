// Options of rl-relay and the weight transfer options of rl-train, rl-rollout and rl-profile weights,
// declared once (see option_table.cc for the shared ones). Flags declared elsewhere with the same
// meaning (--out, --timeout, --runs) get these tools added to their entry instead.
#include "rl/core/options.h"

namespace rl {
void AppendWeightsOptions(std::vector<OptionSpec>* table) {
  AddTools(table, "--out", {"rl-relay pull"});
  AddTools(table, "--timeout", {"rl-relay pull", "rl-relay info"});
  AddTools(table, "--runs", {"rl-profile weights"});
  const std::string serve = "rl-relay serve", publish = "rl-relay publish", pull = "rl-relay pull",
                    info = "rl-relay info", train = "rl-train grpo", rollout = "rl-rollout run",
                    profile = "rl-profile weights";
  table->insert(table->end(), {
      {"--chunk-size", "RL_WEIGHTS_CHUNK_SIZE", "bytes per chunk of a served weight version (each has a CRC-32C)",
       {publish, train, profile}},
      {"--file", "", "safetensors weights file to serve", {publish}},
      {"--max-pulls", "RL_WEIGHTS_MAX_PULLS", "pulls of our weights served at once; more pullers go elsewhere",
       {serve, publish, train, rollout}},
      {"--poll-interval", "RL_WEIGHTS_POLL", "seconds between looks for a newer weight version", {serve, rollout}},
      {"--pullers", "", "pullers updated at once: comma-separated counts", {profile}},
      {"--sizes", "", "weight bundle sizes to move, e.g. 10M,100M,1G", {profile}},
      {"--stall-timeout", "RL_WEIGHTS_STALL", "seconds without a chunk before a pull moves on to another source",
       {serve, pull, rollout}},
      {"--transports", "", "UCX transports to compare, as UCX_TLS values: tcp, sm", {profile}},
      {"--wait-version", "", "wait for a weight version at least this new", {pull}},
      {"--weights-bind", "RL_WEIGHTS_BIND", "endpoint our weight source listens on, e.g. tcp://127.0.0.1:5600",
       {serve, publish, train, rollout}},
      {"--weights-from", "RL_WEIGHTS_FROM",
       "weight sources to pull from: comma-separated endpoints of rl-train, relays or rollouts",
       {serve, pull, info, rollout}},
      {"--weights-version", "", "version number of the served file (default: N of weights-N.safetensors)",
       {publish}},
      {"--weights-timeout", "RL_WEIGHTS_TIMEOUT",
       "seconds without a working weight source before weights files are read instead (one warning says why)",
       {rollout}},
  });
}

}  // namespace rl
