// One role process of a supervised pipeline, and its pid file <run-dir>/watchdog/KIND-ID.pid
// ("PID START_TICKS"), by which a restarted watchdog adopts it.
// Thread safety: one thread.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/health/pipeline.h"
#include "rl/health/slots.h"

namespace rl::health {

struct Instance {
  const RoleSpec* spec = nullptr;
  size_t section = 0;          // index of its role table, the start order
  std::string id;              // RL_ID
  std::string key;             // kind/id, as heartbeats name it
  pid_t pid = 0;               // 0: not running
  int64_t start_ticks = -1;
  bool child = false;          // started by this watchdog (else adopted: no exit status)
  bool ready = false;          // heartbeats from this pid arrived
  bool lent = false;           // drained to make room for the trainer (warm standby)
  std::string lent_to;         // the key of the trainer that took its slot
  int64_t started_ms = 0;      // monotonic
  int64_t ready_ms = 0;        // monotonic: when it was first heard from since its start
  int64_t steps_since_start = 0;
  int failed_restarts = 0;     // consecutive
  int restarts = 0;
  bool history_restored = false;  // adopted, with restarts and steps from the previous watchdog's state.json
  std::vector<int> slots;      // indices into [watchdog] slots it runs in (slots.h); kept across restarts
  bool parked = false;         // a placement instance that holds no slot now: not started (placement.h)
};

std::string PidFilePath(const std::string& run_dir, const Instance& inst);
Status WritePidFile(const std::string& run_dir, const Instance& inst);
void RemovePidFile(const std::string& run_dir, const Instance& inst);
// Adopts the process of the instance's pid file when it still runs (same pid, same start time).
bool AdoptFromPidFile(const std::string& run_dir, Instance* inst);

// The environment every process of a pipeline gets (RL_HEARTBEAT, RL_HEARTBEAT_INTERVAL,
// RL_RUN_DIR); an instance adds its RL_ID.
std::map<std::string, std::string> PipelineEnv(const PipelineSpec& p, const std::string& heartbeat,
                                               const std::string& run_dir);

// What the instance's slots give it: CPUs, GPUs and their environment (slots.h).
SlotGrant InstanceGrant(const PipelineSpec& p, const Instance& inst);

// Starts the instance's command with the pipeline's environment, in its slots; logs go to
// <run-dir>/logs/KIND-ID.log.
Status SpawnInstance(const PipelineSpec& p, const std::string& heartbeat, const std::string& run_dir,
                     Instance* inst);

// Makes `pid` (a child of ours, just started or a spare just activated) the instance's process,
// with a fresh start, and writes its pid file.
Status TakeProcess(const std::string& run_dir, pid_t pid, Instance* inst);

}  // namespace rl::health
