// The pipeline file of `rl-watchdog run` (man/rl-watchdog.1, "PIPELINE FILE"): TOML with a
// [watchdog] table of settings and one [role.NAME] table per role, started in file order:
//
//   [watchdog]
//   heartbeat = "tcp://127.0.0.1:5560"   # endpoint the watchdog binds, roles send to
//   max_full_restarts = 3
//   [role.train]
//   kind = "train"                        # queue, unit, rollout, reward, ref, train, env (its heartbeat role)
//   command = "rl-train grpo --checkpoint-dir ckpt --prompts p.jsonl"
//   count = 1
//   stall = 30                            # seconds without progress in its active phase
//   spares = 1                            # started ahead: replaces a failed instance at once
//   group = false                         # true: the instances form one group (data-parallel ranks)
//   slots = 1                             # slots of [watchdog] slots each instance runs in (slots.h)
//   [placement]                           # optional: the split of slots between two roles moves
//   between = ["rollout", "reward"]       # (placement.h)
//
// Each instance gets RL_HEARTBEAT, RL_HEARTBEAT_INTERVAL, RL_RUN_DIR and RL_ID (0 .. count-1)
// in its environment, so commands need not repeat them. The instances of a group role also get
// WORLD_SIZE (count), RANK (RL_ID) and RL_GROUP_EPOCH (their restarts, the same for all: a fresh
// name for each forming), and when one fails all of them restart.
// Thread safety: values.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::health {

struct RoleSpec {
  std::string name;      // NAME of [role.NAME]
  std::string kind;      // the role its heartbeats name: queue, rollout, reward, train, ...
  std::string command;   // run by /bin/sh
  int count = 1;
  double stall_s = 0;    // 0: the watchdog's default for the kind
  double ready_s = 60;   // a (re)started instance must heartbeat within this long
  bool finish = false;   // its clean exit ends the pipeline (default: true for kind train)
  int spares = 0;        // processes started ahead, held before work, to replace a failed instance (spare.h)
  bool group = false;    // the instances form one process group: one fails, all restart
  int slots = 0;         // slots each instance runs in (0: no slot, any CPU)
};

// [placement]: the instances of two roles trade slots, one at a time, to make steps shortest
// (placement.h). Every instance of both roles has one slot.
struct PlacementSpec {
  std::vector<std::string> between;  // two role kinds; empty: no placement
  int64_t every = 0;     // trainer steps between searches (0: one search, at the start)
  int64_t settle = 2;    // trainer steps ignored after a move
  int64_t measure = 5;   // trainer steps measured per split
  std::string trainer = "train/0";  // whose step events time the steps (events/train-0.jsonl)
  std::string search = "ternary";   // ternary | sweep (every split, in order: to check a search against)
};

struct PipelineSpec {
  std::string heartbeat = "tcp://127.0.0.1:5560";
  double interval_s = 1;
  int missed = 3;
  double probe_window_s = 2;
  int max_full_restarts = 3;
  std::string restart = "role";  // role | job
  bool standby = false;          // a failed trainer takes a drained rollout's place
  double grace_s = 10;           // SIGTERM to SIGKILL when stopping a role on purpose
  std::vector<std::string> slots;  // [watchdog] slots: "cpus=LIST gpus=LIST" each (slots.h)
  PlacementSpec placement;
  std::vector<RoleSpec> roles;
};

// Parses a pipeline file. Config errors name the file and the key.
Result<PipelineSpec> LoadPipeline(const std::string& path);
Result<PipelineSpec> ParsePipeline(const std::string& toml_text, const std::string& name);

}  // namespace rl::health
