#include "rl/profile/child_process.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "rl/core/clock.h"
#include "rl/core/fs.h"

extern char** environ;

namespace rl::profile {

// fork and exec rather than posix_spawn, to set a parent-death signal: when rl-profile dies (^C,
// kill), its servers get SIGTERM instead of living on. Only async-signal-safe calls after fork.
Result<ChildProcess> ChildProcess::Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable("cannot start " + argv[0] + ": fork: " + std::strerror(errno));
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    ::dup2(2, 1);                             // stdout is rl-profile's data
    ::execve(args[0], args.data(), environ);
    ::_exit(127);
  }
  return ChildProcess(pid, argv[0]);
}

Status ChildProcess::Describe(const std::string& name, int wstatus) {
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::OK();
  if (WIFEXITED(wstatus)) return Status::Unavailable(name + " exited with status " + std::to_string(WEXITSTATUS(wstatus)));
  return Status::Unavailable(name + " died of signal " + std::to_string(WTERMSIG(wstatus)));
}

Status ChildProcess::Alive() {
  if (pid_ < 0) return Status::Unavailable(name_ + " is not running");
  int wstatus = 0;
  pid_t r = ::waitpid(pid_, &wstatus, WNOHANG);
  if (r == 0) return Status::OK();
  pid_ = -1;
  Status s = Describe(name_, wstatus);
  return s.ok() ? Status::Unavailable(name_ + " exited") : s;
}

Status ChildProcess::WaitReady(int timeout_ms, const std::function<Status()>& probe) {
  int64_t deadline = MonoMillis() + timeout_ms;
  while (true) {
    RL_RETURN_IF_ERROR(Alive());
    Status s = probe();
    if (s.ok()) return s;
    if (MonoMillis() > deadline) return s.WithContext(name_ + " not ready after " + std::to_string(timeout_ms) + " ms");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

Status ChildProcess::Stop(int grace_ms) {
  if (pid_ < 0) return Status::OK();
  int wstatus = 0;
  if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {  // it was already gone
    pid_ = -1;
    Status s = Describe(name_, wstatus);
    return s.ok() ? Status::Unavailable(name_ + " exited before it was stopped") : s;
  }
  ::kill(pid_, SIGTERM);
  int64_t deadline = MonoMillis() + grace_ms;
  while (::waitpid(pid_, &wstatus, WNOHANG) == 0) {
    if (MonoMillis() > deadline) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &wstatus, 0);
      pid_ = -1;
      return Status::Timeout(name_ + " did not stop within " + std::to_string(grace_ms) + " ms; killed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  pid_ = -1;
  return Describe(name_, wstatus);
}

Result<int> FreeTcpPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  if (rc == 0) rc = ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  if (rc != 0) return Status::IOError(std::string("bind 127.0.0.1:0: ") + std::strerror(errno));
  return static_cast<int>(ntohs(a.sin_port));
}

Status ProbeTcp(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IOError(std::string("socket: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  ::close(fd);
  if (rc != 0) return Status::Unavailable("nothing accepts on 127.0.0.1:" + std::to_string(port));
  return Status::OK();
}

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string rest = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t start = 0;
  while (start <= rest.size()) {
    size_t end = rest.find(':', start);
    if (end == std::string::npos) end = rest.size();
    std::string dir = end > start ? rest.substr(start, end - start) : ".";
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::string SelfDir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

Result<std::string> MakeTempDir(const std::string& prefix) {
  std::string templ = "/tmp/" + prefix + "-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) return Status::IOError(ErrnoMessage("mkdtemp", templ));
  return templ;
}

void RemoveTree(const std::string& dir) {
  std::error_code ec;
  if (dir.rfind("/tmp/", 0) == 0) std::filesystem::remove_all(dir, ec);
}

}  // namespace rl::profile
