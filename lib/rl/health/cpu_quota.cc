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
#include <fstream>
#include <optional>
#include <sstream>

#include "rl/core/crc32c.h"
#include "rl/core/fs.h"
#include "rl/core/printf.h"
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

// A mount of a cpu-controlled hierarchy: `root` is the group mounted at `point` (not "/" inside
// a container that sees only its own part of the tree).
struct Mount {
  std::string root, point;
  bool v2 = false;
};

bool HasToken(const std::string& list, const std::string& token, char sep) {
  std::stringstream in(list);
  for (std::string t; std::getline(in, t, sep);) {
    if (t == token) return true;
  }
  return false;
}

// From /proc/self/mountinfo: "ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS...] - FSTYPE SOURCE SUPER".
// A v1 hierarchy with the cpu controller comes first; the v2 tree only when there is none.
std::optional<Mount> CpuMount() {
  std::ifstream in("/proc/self/mountinfo");
  std::optional<Mount> v2;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, parent, dev, root, point, options, word;
    if (!(f >> id >> parent >> dev >> root >> point >> options)) continue;
    while (f >> word && word != "-") {
    }
    std::string fstype, source, super;
    if (!(f >> fstype >> source >> super)) continue;
    if (fstype == "cgroup" && HasToken(super, "cpu", ',')) return Mount{root, point, false};
    if (fstype == "cgroup2" && !v2) v2 = Mount{root, point, true};
  }
  return v2;
}

// The group `pid` is in on that hierarchy, from /proc/PID/cgroup ("N:cpu,cpuacct:/path" for v1,
// "0::/path" for v2). Empty when the file does not say.
std::string GroupOf(pid_t pid, bool v2) {
  std::ifstream in("/proc/" + (pid > 0 ? std::to_string(pid) : std::string("self")) + "/cgroup");
  for (std::string line; std::getline(in, line);) {
    size_t a = line.find(':'), b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    if (v2 ? line.compare(0, a, "0") == 0 && controllers.empty() : HasToken(controllers, "cpu", ',')) {
      return line.substr(b + 1);
    }
  }
  return "";
}

// The directory of a group path on a mount.
std::string DirOf(const Mount& m, const std::string& group) {
  std::string rel = group;
  if (m.root != "/" && rel.compare(0, m.root.size(), m.root) == 0) rel = rel.substr(m.root.size());
  if (rel == "/") rel.clear();
  return m.point + rel;
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
  std::optional<Mount> m = CpuMount();
  if (!m) return Status::Unavailable("no cgroup hierarchy with the cpu controller is mounted");
  CpuController c;
  c.v2 = m->v2;
  if (!c.v2) {
    c.dir = DirOf(*m, GroupOf(0, false));
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
  if (!control.ok() || !HasToken(std::string(control->substr(0, control->find('\n'))), "cpu", ' ')) {
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
  std::optional<Mount> m = CpuMount();
  if (!m) return Status::Unavailable("no cgroup hierarchy with the cpu controller is mounted");
  std::string group = GroupOf(pid, m->v2);
  if (group.empty()) return Status::NotFound("process " + std::to_string(pid) + " names no cpu group");
  const std::string dir = DirOf(*m, group);
  if (m->v2) {
    RL_ASSIGN_OR_RETURN(std::string max, ReadFile(dir + "/cpu.max"));
    std::istringstream in(max);
    std::string quota;
    double period = 0;
    if (!(in >> quota >> period) || period <= 0) return Status::DataError(dir + "/cpu.max: '" + max + "'");
    if (quota == "max") return -1.0;
    return std::atof(quota.c_str()) / period;
  }
  RL_ASSIGN_OR_RETURN(std::string quota, ReadFile(dir + "/cpu.cfs_quota_us"));
  RL_ASSIGN_OR_RETURN(std::string period, ReadFile(dir + "/cpu.cfs_period_us"));
  double q = std::atof(quota.c_str()), p = std::atof(period.c_str());
  if (p <= 0) return Status::DataError(dir + "/cpu.cfs_period_us: '" + period + "'");
  return q < 0 ? -1.0 : q / p;
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
