// Every option of every tool, declared once. Keep entries sorted by flag within each block.
// "rl-queue" in `tools` means every subcommand of rl-queue; "rl-queue get" means that one only.
#include <algorithm>

#include "rl/core/options.h"

namespace rl {

std::vector<OptionSpec> CoreOptionTable();

void AppendTrainOptions(std::vector<OptionSpec>* table);    // option_table_train.cc
void AppendRolloutOptions(std::vector<OptionSpec>* table);  // option_table_rollout.cc (and rl-reward)
void AppendWeightsOptions(std::vector<OptionSpec>* table);  // option_table_weights.cc (rl-relay, weight sync)
void AppendHealthOptions(std::vector<OptionSpec>* table);   // option_table_health.cc (heartbeats, rl-watchdog)
void AppendEnvOptions(std::vector<OptionSpec>* table);      // option_table_env.cc (rl-env); after health
void AppendJudgeOptions(std::vector<OptionSpec>* table);    // option_table_judge.cc (rl-reward --judge); after train
void AppendPlanOptions(std::vector<OptionSpec>* table);     // option_table_plan.cc (rl-profile plan)

void AddTools(std::vector<OptionSpec>* table, const std::string& flag, const std::vector<std::string>& tools) {
  auto it = std::find_if(table->begin(), table->end(), [&](const OptionSpec& s) { return s.flag == flag; });
  if (it == table->end()) return;  // the options test finds a tool binding an undeclared flag
  it->tools.insert(it->tools.end(), tools.begin(), tools.end());
}

const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> table = [] {
    std::vector<OptionSpec> t = CoreOptionTable();
    AppendTrainOptions(&t);
    AppendRolloutOptions(&t);
    AppendWeightsOptions(&t);
    AppendHealthOptions(&t);
    AppendEnvOptions(&t);
    AppendJudgeOptions(&t);
    AppendPlanOptions(&t);
    return t;
  }();
  return table;
}

std::vector<OptionSpec> CoreOptionTable() {
  return {
      // Shared by every tool.
      {"--log-level", "RL_LOG_LEVEL", "stderr log level: trace, debug, info, warn, error, off",
       {"rl-queue", "rl-profile", "rl-rollout", "rl-reward", "rl-train", "rl-relay", "rl-watchdog"}},
      {"--run-dir", "RL_RUN_DIR", "run directory; event logs go to RUN_DIR/events",
       {"rl-queue serve", "rl-queue unit", "rl-rollout", "rl-reward", "rl-train", "rl-relay", "rl-watchdog"}},
      {"--id", "RL_ID",
       "instance id of this role in event logs and heartbeats; rollout, reward, ref (rl-train score) and train also "
       "hold their queue leases as KIND/ID and give back, at start, those an earlier process with this id left: unique "
       "per kind",
       {"rl-queue serve", "rl-queue unit", "rl-rollout", "rl-reward", "rl-train", "rl-relay", "rl-watchdog"}},
      {"--connect", "RL_QUEUE", "rl-queue endpoint to talk to, e.g. tcp://127.0.0.1:5555",
       {"rl-queue", "rl-rollout", "rl-reward", "rl-train", "rl-profile queue"}},
      {"--timeout", "RL_TIMEOUT", "seconds to keep retrying an unanswered request before giving up",
       {"rl-queue", "rl-rollout", "rl-reward", "rl-train"}},

      // Shared by the learning roles (rl-rollout, rl-reward, rl-train).
      {"--checkpoint-dir", "RL_CHECKPOINT_DIR", "directory of weight versions and trainer checkpoints",
       {"rl-rollout", "rl-train"}},
      {"--weights", "RL_WEIGHTS", "safetensors model file to start from", {"rl-rollout", "rl-train"}},
      {"--model", "RL_MODEL",
       "Hugging Face model directory: config.json, tokenizer.json, tokenizer_config.json, weights optional "
       "(the demo's: share/models/addition-tiny)",
       {"rl-rollout", "rl-train"}},
      {"--threads", "RL_THREADS", "compute threads of this role (roles share the cores: set it on purpose)",
       {"rl-rollout", "rl-reward", "rl-train", "rl-profile"}},
      {"--seed", "RL_SEED", "random seed", {"rl-rollout", "rl-train", "rl-profile"}},
      {"--device", "RL_DEVICE",
       "where this role's model computes: cpu, cuda or cuda:N (cuda needs a build with -DRL_WITH_CUDA=ON)",
       {"rl-rollout", "rl-reward", "rl-train", "rl-profile"}},

      // rl-queue serve
      {"--bind", "RL_QUEUE_BIND", "endpoint the server listens on, e.g. tcp://127.0.0.1:5555",
       {"rl-queue serve", "rl-queue unit"}},
      {"--dir", "RL_QUEUE_DIR", "data directory: write-ahead log and snapshots", {"rl-queue serve", "rl-queue unit"}},
      {"--fsync", "RL_QUEUE_FSYNC", "when the log is fsynced: always, batch (group commit) or never",
       {"rl-queue serve", "rl-queue unit", "rl-profile queue"}},
      {"--fsync-interval-ms", "RL_QUEUE_FSYNC_INTERVAL_MS", "--fsync batch: the most a power loss may lose, in ms of replies",
       {"rl-queue serve", "rl-queue unit"}},
      {"--max-message", "RL_QUEUE_MAX_MESSAGE", "largest request in bytes; larger ones get TooLarge",
       {"rl-queue serve", "rl-queue unit"}},
      {"--units", "RL_QUEUE_UNITS",
       "storage units' endpoints (rl-queue unit), comma-separated, in an order kept for the queue's life: the "
       "server becomes their controller and rows' large values live on them",
       {"rl-queue serve"}},
      {"--unit-grace-ms", "RL_QUEUE_UNIT_GRACE_MS",
       "a unit row no row refers to is freed once staged this long ago; puts of rows staged over half of it ago "
       "are refused (clocks must agree to well within half)",
       {"rl-queue serve"}},
      {"--unit-min-bytes", "RL_QUEUE_UNIT_MIN_BYTES",
       "with --units: strings, bytes and tensors of this many bytes or more go to the units; smaller values stay in "
       "the controller (published as queue.unit_min_bytes)",
       {"rl-queue serve"}},
      {"--snapshot-bytes", "RL_QUEUE_SNAPSHOT_BYTES", "write a snapshot once the log grows past this many bytes",
       {"rl-queue serve", "rl-queue unit"}},
      {"--declare", "", "declare a task: NAME=COL1,COL2 (repeatable)", {"rl-queue serve"}},

      // rl-queue clients
      {"--batch", "RL_PUT_BATCH", "rows per put request", {"rl-queue put", "rl-profile queue"}},
      {"--repeat", "", "put each input line this many times as one group (G responses per prompt)",
       {"rl-queue put"}},
      {"--update", "",
       "TASK:LEASE: write the lines' columns into rows that lease holds, replacing values, leaving them leased",
       {"rl-queue put"}},
      {"--renew", "", "with --update: the lease then ends this many seconds after the update", {"rl-queue put"}},
      {"--window", "RL_PUT_WINDOW",
       "requests in flight at once on the connection (pipelining; 1: wait for each reply before the next)",
       {"rl-queue put", "rl-profile queue"}},
      {"--task", "", "task (controller) name",
       {"rl-queue get", "rl-queue ack", "rl-queue nack", "rl-queue task", "rl-queue retire"}},
      {"--columns", "", "comma-separated column names", {"rl-queue get", "rl-queue task"}},
      {"--also", "", "comma-separated columns to print too, from the rows that have them (not the task's)",
       {"rl-queue get"}},
      {"--count", "", "rows wanted", {"rl-queue get"}},
      {"--min", "", "hand out as soon as this many rows are ready (default: --count; 1 streams)",
       {"rl-queue get"}},
      {"--lease", "", "lease length in seconds", {"rl-queue get"}},
      {"--wait", "", "seconds to wait for enough ready rows", {"rl-queue get"}},
      {"--groups", "", "hand out whole groups only", {"rl-queue get"}},
      {"--min-version", "", "staleness bound: rows with a lower version are not handed out",
       {"rl-queue get"}},
      {"--on-stale", "", "what happens to rows below --min-version: drop or regenerate", {"rl-queue get"}},
      {"--drop-uniform", "", "drop whole groups whose values of this column are all equal",
       {"rl-queue get"}},
      {"--balance", "", "token-balance batches across --parts consumers by the length of this column",
       {"rl-queue get"}},
      {"--parts", "", "number of concurrent consumers a balanced round is split across", {"rl-queue get"}},
      {"--lease-id", "", "lease the rows were handed out under (0: any)", {"rl-queue ack", "rl-queue nack"}},
      {"--holder", "", "who holds the leases, KIND/ID: get names it; nack gives back all its leases of the task",
       {"rl-queue get", "rl-queue nack"}},
      {"--if-equals", "", "set only when the current value equals this (compare-and-set)",
       {"rl-queue meta"}},
      {"--optional", "", "the task keeps no row alive: rows go once the other tasks consumed them",
       {"rl-queue task"}},
      {"--json", "", "print JSON lines instead of a table", {"rl-queue stat", "rl-profile"}},

      // rl-profile queue
      {"--producers", "", "concurrent producers", {"rl-profile queue"}},
      {"--consumers", "", "concurrent consumers", {"rl-profile queue"}},
      {"--rows", "", "rows per producer and pass (0: 8192, fewer for large rows)", {"rl-profile queue"}},
      {"--row-bytes", "", "payload bytes per row", {"rl-profile queue"}},
      {"--in-process", "", "serve rl-queue from a thread of rl-profile instead of a child rl-queue process",
       {"rl-profile queue"}},
      {"--redis", "", "compare against redis-server streams: auto (when on PATH), off, or its path",
       {"rl-profile queue"}},
      {"--runs", "",
       "runs of each figure; the median run's is printed (queue: the systems alternate; 0: 3, or 1 with --rows)",
       {"rl-profile queue"}},
      {"--unit-counts", "",
       "storage unit counts to compare (0: a server without units): rows of --fields int32 tensors of --tokens "
       "tokens, rows/s and the controller's and the units' CPU per row, instead of the Redis comparison",
       {"rl-profile queue"}},
      {"--fields", "", "with --unit-counts: tensor columns per row", {"rl-profile queue"}},
      {"--tokens", "", "with --unit-counts: int32 tokens per tensor column", {"rl-profile queue"}},
  };
}

}  // namespace rl
