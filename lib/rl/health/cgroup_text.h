// The kernel's cgroup files as text: which mount holds the cpu controller (/proc/self/mountinfo),
// which group a process is in (/proc/PID/cgroup), and a group's quota (cpu.max for v2,
// cpu.cfs_quota_us and cpu.cfs_period_us for v1). Pure functions of the text, so that both cgroup
// versions are tested on any machine (cpu_quota.cc reads the files and calls these).
// Thread safety: reentrant.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "rl/core/status.h"

namespace rl::health {

// A mount of a cpu-controlled hierarchy: `root` is the group mounted at `point` (not "/" inside
// a container that sees only its own part of the tree).
struct CgroupMount {
  std::string root, point;
  bool v2 = false;
};

// From mountinfo lines "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER":
// the first v1 hierarchy with the cpu controller, else the first v2 tree, else nothing. Lines
// that do not parse are skipped.
std::optional<CgroupMount> CpuMountFrom(std::string_view mountinfo);

// From /proc/PID/cgroup lines ("N:cpu,cpuacct:/path" for v1, "0::/path" for v2): the group on
// that hierarchy. Empty when the text does not say.
std::string CpuGroupFrom(std::string_view proc_cgroup, bool v2);

// The directory of `group` on the mount `m`: the mount's root taken off the group's path.
std::string GroupDirOf(const CgroupMount& m, const std::string& group);

// Whether a v2 group's cgroup.subtree_control ("cpu io memory pids") hands cpu to its children.
bool HandsDownCpu(std::string_view subtree_control);

// A quota in CPUs (-1: none): from cpu.max ("max 100000", "50000 100000"), or from the v1 pair
// (quota -1: none). DataError naming `where` for text that is not that.
Result<double> QuotaFromCpuMax(std::string_view text, const std::string& where);
Result<double> QuotaFromCfs(std::string_view quota, std::string_view period, const std::string& where);

}  // namespace rl::health
