// Child processes for the benchmark's servers (rl-queue, redis-server), and the small helpers
// around them: a free port on 127.0.0.1, waiting for a port to accept, finding executables.
// Thread safety: a ChildProcess belongs to one thread; the free functions are reentrant.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::profile {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with argv. Its stdout goes to our stderr: stdout is the tool's data.
  static Result<ChildProcess> Spawn(const std::vector<std::string>& argv);
  ChildProcess(ChildProcess&& o) noexcept : pid_(o.pid_), name_(std::move(o.name_)) { o.pid_ = -1; }
  ChildProcess& operator=(ChildProcess&&) = delete;
  ChildProcess(const ChildProcess&) = delete;
  ~ChildProcess() { (void)Stop(2000); }

  // SIGTERM, then SIGKILL when it has not exited after grace_ms; reaps it. Error when it had
  // already died (it crashed) or exited non-zero.
  Status Stop(int grace_ms);
  // OK while it runs; the reason when it has exited (and it is reaped).
  Status Alive();
  // Calls probe until it returns OK, up to timeout_ms; fails at once when the child exits.
  Status WaitReady(int timeout_ms, const std::function<Status()>& probe);
  pid_t pid() const { return pid_; }

 private:
  ChildProcess(pid_t pid, std::string name) : pid_(pid), name_(std::move(name)) {}
  static Status Describe(const std::string& name, int wstatus);
  pid_t pid_;
  std::string name_;
};

// A port on 127.0.0.1 nothing listened on a moment ago.
Result<int> FreeTcpPort();
// One attempt to connect to 127.0.0.1:port.
Status ProbeTcp(int port);
// The path of an executable `name` found on PATH, or empty.
std::string FindOnPath(const std::string& name);
// The directory of the running executable.
std::string SelfDir();
// A fresh directory under /tmp; removed by RemoveTree.
Result<std::string> MakeTempDir(const std::string& prefix);
void RemoveTree(const std::string& dir);

}  // namespace rl::profile
