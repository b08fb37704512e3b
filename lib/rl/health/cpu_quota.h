// CPU quotas: a slot's `quota=F` (man/rl-watchdog.1, SLOTS) made real with the kernel's CFS
// bandwidth control. A process in slots with quotas runs in a cgroup of the cpu controller whose
// quota is the sum of its slots' F, in CPUs of time: at most F x 10 ms of CPU in every 10 ms
// period (a longer period below 0.1 CPUs), however idle the machine is. That is what a GPU slot
// is and a shared core is not: the share a slot's role leaves unused is not taken by the roles of
// other slots, so moving a slot from one role to another moves capacity (a split of shared cores
// moved nothing while one role waited).
//
// The groups: <controller>/roleflow-<CRC-32C of the run directory, hex>/slots-<ids>, e.g.
// /sys/fs/cgroup/cpu/roleflow-1a2b3c4d/slots-2 for slot 2 of one run (cgroup v1), made when a
// process first needs one and removed when the watchdog stops. The controller is the cgroup v1
// cpu hierarchy at this process's own group in it, or the cgroup v2 root when its
// cgroup.subtree_control has cpu; anything else (no permission, a v2 tree that does not delegate
// cpu) is Unavailable, and rl-watchdog refuses to start a pipeline with quotas rather than run it
// without them.
// Thread safety: reentrant functions; two processes may make the same group at once.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::health {

// The directory under which this process may make cpu-controlled groups, and whether it is
// cgroup v2. Unavailable, saying what is missing, when there is none.
struct CpuController {
  std::string dir;
  bool v2 = false;
};
Result<CpuController> FindCpuController();

// The group's directory (see above) for `slots` of the run in `run_dir`.
std::string QuotaGroupDir(const CpuController& c, const std::string& run_dir, const std::vector<int>& slots);

// Makes (or keeps) the group of `slots` with a quota of `cpus` CPUs (0.01 to 4096) and opens its
// cgroup.procs for writing (O_CLOEXEC). Writing "0" to that descriptor moves the writing process
// into the group, with every thread it makes afterwards: SpawnRole does so in the child, before
// exec. IOError when the kernel refuses.
Result<int> OpenQuotaGroup(const std::string& run_dir, const std::vector<int>& slots, double cpus);
// Moves every thread of a running process into the group of `slots` (an activated spare).
Status JoinQuotaGroup(const std::string& run_dir, const std::vector<int>& slots, double cpus, pid_t pid);
// The quota of the group `pid` is in, in CPUs, read back from the kernel: -1 when it has none,
// an error when the controller or the group cannot be read.
Result<double> QuotaOfProcess(pid_t pid);
// Removes the run's groups no process is in any more (rmdir fails on the others); best effort.
void RemoveQuotaGroups(const std::string& run_dir);

}  // namespace rl::health
