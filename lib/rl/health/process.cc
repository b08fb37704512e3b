#include "rl/health/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "rl/core/clock.h"
#include "rl/core/fs.h"

namespace rl::health {

std::vector<std::string> StatFields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return {};
  size_t close = line.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

Result<pid_t> SpawnRole(const std::string& command, const std::map<std::string, std::string>& env,
                        const std::string& log_path, int inherit_fd, const std::vector<int>& cpus, int join_fd) {
  cpu_set_t affinity;
  CPU_ZERO(&affinity);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE) return Status::InvalidArgument("CPU " + std::to_string(c) + " is out of range");
    CPU_SET(c, &affinity);
  }
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return Status::IOError(ErrnoMessage("open", log_path));
  // exec makes the role the session leader, so its pid is the one its heartbeats carry.
  bool compound = command.find_first_of(";&|\n") != std::string::npos;
  std::string exec = compound ? command : "exec " + command;
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return Status::IOError(ErrnoMessage("fork", command));
  }
  if (pid == 0) {
    // Child: only async-signal-safe calls until exec.
    ::setsid();
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(log, 1);
    ::dup2(log, 2);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    if (inherit_fd >= 0) ::fcntl(inherit_fd, F_SETFD, 0);
    if (!cpus.empty() && ::sched_setaffinity(0, sizeof affinity, &affinity) != 0) {
      static const char kWhy[] = "rl-watchdog: the kernel refused the CPU affinity of this role's slots\n";
      (void)!::write(2, kWhy, sizeof kWhy - 1);
      ::_exit(126);
    }
    if (join_fd >= 0 && ::write(join_fd, "0", 1) != 1) {
      static const char kWhy[] = "rl-watchdog: the kernel refused to put this role in its slots' CPU quota group\n";
      (void)!::write(2, kWhy, sizeof kWhy - 1);
      ::_exit(126);
    }
    ::execl("/bin/sh", "sh", "-c", exec.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(log);
  return pid;
}

int64_t ProcessStartTicks(pid_t pid) {
  std::vector<std::string> f = StatFields(pid);
  if (f.size() < 20) return -1;
  return std::stoll(f[19]);  // field 22
}

int64_t ProcessSession(pid_t pid) {
  std::vector<std::string> f = StatFields(pid);
  if (f.size() < 4) return -1;
  return std::stoll(f[3]);  // field 6
}

namespace {

// Threads of `pid` still listed by the kernel (/proc/PID/task); 0 when it is gone.
int ThreadCount(pid_t pid) {
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (d == nullptr) return 0;
  int n = 0;
  while (const dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

}  // namespace

bool ProcessGone(pid_t pid) {
  if (pid <= 0) return true;
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::vector<std::string> f = StatFields(pid);
  if (f.empty()) return true;
  if (f[0] != "Z" && f[0] != "X") return false;
  // The main thread can be a zombie while the other threads are still exiting, and they hold
  // the process's files until the last one is done: rl-queue's directory lock, a bound port. A
  // queue restarted in that window exited 69 (directory locked) in the kill matrix.
  return ThreadCount(pid) <= 1;
}

std::optional<int> ReapChild(pid_t pid) {
  int status = 0;
  pid_t r = ::waitpid(pid, &status, WNOHANG);
  if (r == pid) return status;
  return std::nullopt;
}

std::string DescribeWaitStatus(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char* name = sigabbrev_np(sig);
    return "killed by signal " + std::to_string(sig) + (name ? std::string(" (") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

void StopProcess(pid_t pid, int64_t grace_ms) { StopProcesses({{pid, grace_ms}}); }

void StopProcesses(const std::vector<StopOrder>& orders) {
  auto signal = [](pid_t pid, int sig) {
    ::kill(-pid, sig);  // the role's session (a shell's children too)
    ::kill(pid, sig);
  };
  int64_t now = MonoMillis(), last = now;
  std::vector<int64_t> kill_at;  // monotonic; 0: SIGKILL sent
  for (const StopOrder& o : orders) {
    kill_at.push_back(o.pid <= 0 ? 0 : now + std::max<int64_t>(0, o.grace_ms));
    if (o.pid <= 0) continue;
    signal(o.pid, SIGCONT);  // a stopped (SIGSTOP) process must run to handle SIGTERM
    if (o.grace_ms > 0) signal(o.pid, SIGTERM);
    last = std::max(last, kill_at.back());
  }
  // Until every one is gone: SIGKILL each whose grace is over; after the last SIGKILL, wait up to
  // 5 s more for the kernel to tear them down (a process with much memory takes a while).
  for (bool all_gone = false; !all_gone;) {
    all_gone = true;
    now = MonoMillis();
    for (size_t i = 0; i < orders.size(); ++i) {
      pid_t pid = orders[i].pid;
      if (pid <= 0) continue;
      ReapChild(pid);
      if (ProcessGone(pid)) continue;
      all_gone = false;
      if (kill_at[i] != 0 && now >= kill_at[i]) {
        signal(pid, SIGKILL);
        kill_at[i] = 0;
      }
    }
    if (all_gone || now > last + 5000) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const StopOrder& o : orders) {
    if (o.pid > 0) ReapChild(o.pid);
  }
}

}  // namespace rl::health
