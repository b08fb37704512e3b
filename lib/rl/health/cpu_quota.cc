#include "rl/health/cpu_quota.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include "rl/core/crc32c.h"
#include "rl/core/fs.h"
#include "rl/core/printf.h"
#include "rl/health/cgroup_text.h"
#include "rl/health/slots.h"

namespace rl::health {
namespace {

// The CFS period of a quota: 10 ms, or longer where F x 10 ms would be under the kernel's least
// quota of 1 ms. A short period keeps a slot's speed even: with the default 100 ms, a role given a
// sixth of a CPU that has a 25 ms piece of work runs 17 ms, waits 83 ms, and every hop of a
// pipeline pays that wait.
int64_t PeriodUs(double cpus) {
  return std::clamp<int64_t>(static_cast<int64_t>(std::ceil(1000 / cpus)), 10000, 1000000);
}

// The cpu mount and this process's group in it, from the kernel's files.
std::optional<CgroupMount> CpuMount() {
  auto text = ReadFile("/proc/self/mountinfo");
  return text.ok() ? CpuMountFrom(*text) : std::nullopt;
}

// The group `pid` (0: this process) is in on that hierarchy; empty when /proc does not say.
std::string GroupOf(pid_t pid, bool v2) {
  auto text = ReadFile("/proc/" + (pid > 0 ? std::to_string(pid) : std::string("self")) + "/cgroup");
  return text.ok() ? CpuGroupFrom(*text, v2) : "";
}

Status WriteText(const std::string& path, const std::string& text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(ErrnoMessage("open", path));
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Status::IOError("write '" + text + "' to " + path + ": " + std::strerror(n < 0 ? err : EIO));
  }
  return Status::OK();
}

std::string RunGroupDir(const CpuController& c, const std::string& run_dir) {
  std::error_code ec;
  std::string canonical = std::filesystem::weakly_canonical(run_dir, ec).string();
  if (ec || canonical.empty()) canonical = run_dir;
  return c.dir + Printf("/roleflow-%08x", Crc32c(canonical.data(), canonical.size()));
}

Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return Status::IOError(ErrnoMessage("mkdir", dir));
  return Status::OK();
}

}  // namespace

Result<CpuController> FindCpuController() {
  std::optional<CgroupMount> m = CpuMount();
  if (!m) return Status::Unavailable("no cgroup hierarchy with the cpu controller is mounted");
  CpuController c;
  c.v2 = m->v2;
  if (!c.v2) {
    c.dir = GroupDirOf(*m, GroupOf(0, false));
    if (::access((c.dir + "/cpu.cfs_quota_us").c_str(), F_OK) != 0) c.dir = m->point;  // our group is not visible
    if (::access(c.dir.c_str(), W_OK) != 0) {
      return Status::Unavailable("the cgroup v1 cpu group " + c.dir + " is not writable: " + std::strerror(errno));
    }
    return c;
  }
  // v2: a group with cpu in its subtree_control may not hold processes itself, so groups are made
  // under the root, which is exempt, and only when it hands cpu down.
  c.dir = m->point;
  auto control = ReadFile(c.dir + "/cgroup.subtree_control");
  if (!control.ok() || !HandsDownCpu(*control)) {
    return Status::Unavailable("the cgroup v2 root " + c.dir + " does not hand the cpu controller to its groups "
                               "(cgroup.subtree_control)");
  }
  if (::access(c.dir.c_str(), W_OK) != 0) {
    return Status::Unavailable("the cgroup v2 root " + c.dir + " is not writable: " + std::strerror(errno));
  }
  return c;
}

std::string QuotaGroupDir(const CpuController& c, const std::string& run_dir, const std::vector<int>& slots) {
  std::string ids = IdListText(slots);
  for (char& ch : ids) {
    if (ch == ',') ch = '_';
  }
  return RunGroupDir(c, run_dir) + "/slots-" + ids;
}

Result<int> OpenQuotaGroup(const std::string& run_dir, const std::vector<int>& slots, double cpus) {
  if (!(cpus >= 0.01 && cpus <= 4096)) return Status::InvalidArgument(Printf("a CPU quota of %g CPUs", cpus));
  RL_ASSIGN_OR_RETURN(CpuController c, FindCpuController());
  const std::string parent = RunGroupDir(c, run_dir), group = QuotaGroupDir(c, run_dir, slots);
  RL_RETURN_IF_ERROR(MakeDir(parent));
  if (c.v2) RL_RETURN_IF_ERROR(WriteText(parent + "/cgroup.subtree_control", "+cpu"));
  RL_RETURN_IF_ERROR(MakeDir(group));
  const int64_t period = PeriodUs(cpus);
  const auto quota = static_cast<int64_t>(std::llround(cpus * static_cast<double>(period)));
  if (c.v2) {
    RL_RETURN_IF_ERROR(WriteText(group + "/cpu.max", Printf("%lld %lld", static_cast<long long>(quota),
                                                            static_cast<long long>(period))));
  } else {
    // The period first: a quota is checked against the period in force.
    // The quota is checked against the period in force: lift it before a shorter period, so that
    // neither write sees a pair the kernel refuses (a quota over the period is allowed).
    RL_RETURN_IF_ERROR(WriteText(group + "/cpu.cfs_quota_us", "-1"));
    RL_RETURN_IF_ERROR(WriteText(group + "/cpu.cfs_period_us", std::to_string(period)));
    RL_RETURN_IF_ERROR(WriteText(group + "/cpu.cfs_quota_us", std::to_string(quota)));
  }
  const std::string procs = group + "/cgroup.procs";
  int fd = ::open(procs.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return Status::IOError(ErrnoMessage("open", procs));
  return fd;
}

Status JoinQuotaGroup(const std::string& run_dir, const std::vector<int>& slots, double cpus, pid_t pid) {
  RL_ASSIGN_OR_RETURN(int fd, OpenQuotaGroup(run_dir, slots, cpus));
  std::string text = std::to_string(pid);
  ssize_t n = ::write(fd, text.data(), text.size());
  int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) {
    return Status::IOError("move process " + text + " into its slots' CPU quota group: " + std::strerror(err));
  }
  return Status::OK();
}

Result<double> QuotaOfProcess(pid_t pid) {
  std::optional<CgroupMount> m = CpuMount();
  if (!m) return Status::Unavailable("no cgroup hierarchy with the cpu controller is mounted");
  std::string group = GroupOf(pid, m->v2);
  if (group.empty()) return Status::NotFound("process " + std::to_string(pid) + " names no cpu group");
  const std::string dir = GroupDirOf(*m, group);
  if (m->v2) {
    RL_ASSIGN_OR_RETURN(std::string max, ReadFile(dir + "/cpu.max"));
    return QuotaFromCpuMax(max, dir + "/cpu.max");
  }
  RL_ASSIGN_OR_RETURN(std::string quota, ReadFile(dir + "/cpu.cfs_quota_us"));
  RL_ASSIGN_OR_RETURN(std::string period, ReadFile(dir + "/cpu.cfs_period_us"));
  return QuotaFromCfs(quota, period, dir);
}

void RemoveQuotaGroups(const std::string& run_dir) {
  auto c = FindCpuController();
  if (!c.ok()) return;
  const std::string parent = RunGroupDir(*c, run_dir);
  if (DIR* d = ::opendir(parent.c_str())) {
    while (const dirent* e = ::readdir(d)) {
      if (std::strncmp(e->d_name, "slots-", 6) == 0) (void)::rmdir((parent + "/" + e->d_name).c_str());
    }
    ::closedir(d);
  }
  (void)::rmdir(parent.c_str());
}

}  // namespace rl::health
