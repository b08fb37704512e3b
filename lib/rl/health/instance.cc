#include "rl/health/instance.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>

#include "rl/core/clock.h"
#include "rl/core/fs.h"
#include "rl/health/cpu_quota.h"
#include "rl/health/process.h"

namespace rl::health {

std::string PidFilePath(const std::string& run_dir, const Instance& inst) {
  return run_dir + "/watchdog/" + inst.spec->kind + "-" + inst.id + ".pid";
}

Status WritePidFile(const std::string& run_dir, const Instance& inst) {
  RL_RETURN_IF_ERROR(MakeDirs(run_dir + "/watchdog"));
  return WriteFileAtomic(PidFilePath(run_dir, inst), std::to_string(inst.pid) + " " + std::to_string(inst.start_ticks) +
                                                         " " + std::to_string(inst.section) + "\n");
}

void RemovePidFile(const std::string& run_dir, const Instance& inst) {
  std::remove(PidFilePath(run_dir, inst).c_str());
}

bool AdoptFromPidFile(const std::string& run_dir, Instance* inst) {
  std::ifstream in(PidFilePath(run_dir, *inst));
  long long pid = 0, ticks = -1;
  if (!(in >> pid >> ticks) || pid <= 0) return false;
  if (ProcessGone(static_cast<pid_t>(pid)) || ProcessStartTicks(static_cast<pid_t>(pid)) != ticks) return false;
  inst->pid = static_cast<pid_t>(pid);
  inst->start_ticks = ticks;
  inst->child = false;
  inst->ready = false;
  inst->started_ms = MonoMillis();
  return true;
}

std::map<std::string, std::string> PipelineEnv(const PipelineSpec& p, const std::string& heartbeat,
                                               const std::string& run_dir) {
  return {{"RL_HEARTBEAT", heartbeat}, {"RL_HEARTBEAT_INTERVAL", std::to_string(p.interval_s)}, {"RL_RUN_DIR", run_dir}};
}

SlotGrant InstanceGrant(const PipelineSpec& p, const Instance& inst) {
  std::vector<Slot> all;
  for (const std::string& text : p.slots) {
    auto slot = ParseSlot(text);  // LoadPipeline checked them
    all.push_back(slot.ok() ? *slot : Slot{});
  }
  return Grant(all, inst.slots);
}

Status SpawnInstance(const PipelineSpec& p, const std::string& heartbeat, const std::string& run_dir,
                     Instance* inst) {
  RL_RETURN_IF_ERROR(MakeDirs(run_dir + "/logs"));
  std::map<std::string, std::string> env = PipelineEnv(p, heartbeat, run_dir);
  env["RL_ID"] = inst->id;
  if (inst->spec->group) {  // every instance of a group restarts together, so restarts agree
    env["WORLD_SIZE"] = std::to_string(inst->spec->count);
    env["RANK"] = inst->id;
    env["RL_GROUP_EPOCH"] = std::to_string(inst->restarts);
  }
  std::vector<int> cpus;
  int join_fd = -1;
  if (!inst->slots.empty()) {
    SlotGrant g = InstanceGrant(p, *inst);
    env.merge(GrantEnv(g));
    cpus = g.cpus;
    if (g.quota > 0) {
      auto fd = OpenQuotaGroup(run_dir, g.slots, g.quota);
      if (!fd.ok()) return Status::IOError(inst->key + "'s CPU quota: " + fd.status().message());
      join_fd = *fd;
    }
  }
  std::string log = run_dir + "/logs/" + inst->spec->kind + "-" + inst->id + ".log";
  Result<pid_t> pid = SpawnRole(inst->spec->command, env, log, -1, cpus, join_fd);
  if (join_fd >= 0) ::close(join_fd);
  if (!pid.ok()) return pid.status();
  return TakeProcess(run_dir, *pid, inst);
}

Status TakeProcess(const std::string& run_dir, pid_t pid, Instance* inst) {
  inst->pid = pid;
  inst->start_ticks = ProcessStartTicks(pid);
  inst->child = true;
  inst->ready = false;
  inst->lent = false;
  inst->lent_to.clear();
  inst->started_ms = MonoMillis();
  inst->steps_since_start = 0;
  inst->history_restored = false;
  return WritePidFile(run_dir, *inst);
}

}  // namespace rl::health
