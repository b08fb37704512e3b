// CoProcess: a shell command run as a child that answers one line for each line it is sent.
// Used by rl-reward --exec (lib/rl/reward/exec_verifier.h) and by rl-env's tools (lib/rl/env).
//
// The command runs as `/bin/sh -c COMMAND` in a process group of its own, with its stdin and
// stdout on pipes; it is killed when this process dies (Linux parent-death signal). It is started
// on the first Call and again on the first Call after it died or was killed, so a crashed command
// is restarted by simply calling again. Starting one ignores SIGPIPE for the whole process: a
// dead child shows as an error from Call, not as a signal.
//
// Options (all off by default, which is what rl-reward uses) put the command in a sandbox of
// sorts: resource limits set in the child before exec (memory as RLIMIT_AS, CPU seconds as
// RLIMIT_CPU, both inherited by anything it starts), a cap on the bytes of one reply, no network
// (new user and network namespaces, where the kernel lets an unprivileged process make them), and
// its stderr read and logged line by line with a prefix instead of shared with ours.
// Thread safety: one thread at a time per CoProcess; several CoProcesses may run in parallel.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "rl/core/status.h"

namespace rl {

enum class NetworkIsolation {
  kOff,      // the command has the network
  kTry,      // new user + network namespaces when the kernel allows it, else the network
  kRequire,  // the same, but a command that cannot be isolated exits 126 before it runs
};

struct CoProcessOptions {
  std::string label = "exec";  // first word of messages and log lines: "exec: 'cmd' exited ..."
  std::string name;            // how messages name the command; empty: the command, quoted
  int64_t memory_bytes = 0;    // RLIMIT_AS of the command; 0: none
  int64_t cpu_seconds = 0;     // RLIMIT_CPU of the command (over its whole life); 0: none
  // The most bytes of output one exchange may read (the reply line and anything after it);
  // more, or a line that long without its newline, ends the exchange with TooLarge and the
  // command is killed. 0: no cap.
  size_t max_output_bytes = 0;
  // True: the command must write exactly one line per request. Output after the reply line in
  // the same exchange (a second line, a flood) is an error: DataError, or TooLarge past the cap,
  // and the command is killed. False (rl-reward): it is left for the next Call to find as stray.
  bool one_line = false;
  NetworkIsolation network = NetworkIsolation::kOff;
  bool log_stderr = false;  // read stderr and log each line as "<label> <name>[pid]: line"
  // When it turns true, a Call in progress ends within 100 ms with Unavailable ("stopping") and
  // the command is killed. Null: never.
  const std::atomic<bool>* cancel = nullptr;
};

class CoProcess {
 public:
  explicit CoProcess(std::string command, CoProcessOptions options = {});
  ~CoProcess() { Kill(); }
  CoProcess(const CoProcess&) = delete;
  CoProcess& operator=(const CoProcess&) = delete;

  // Writes `line` and a newline, and returns the next line the command writes (without its
  // newline), waiting at most timeout_ms for the whole exchange.
  //   Unavailable: the command could not be started, or exited (the message has its status,
  //                last_exit() too).
  //   Timeout: no whole line in time; the command has been killed (the next Call restarts it).
  //   TooLarge: over max_output_bytes; the command has been killed.
  //   DataError: one_line, and it wrote more than its reply; the command has been killed.
  // Output the command wrote since the last reply (a line nobody asked for) means the exchange is
  // out of step: the command is restarted first, and the stray output logged. Stray output that
  // arrives only after this request was sent cannot be told from the reply (the protocol has no
  // request ids); a reply that does not parse restarts the command too.
  // REQUIRES: `line` holds no newline.
  Result<std::string> Call(const std::string& line, int64_t timeout_ms);

  // Kills the command's process group (SIGKILL) and reaps it. Does nothing when none runs.
  void Kill();

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int starts() const { return starts_; }  // how many times the command was started
  // How the command last ended: "exited with status 3", "was killed by signal 9 (SIGKILL)".
  const std::string& last_exit() const { return last_exit_; }
  // The most CPU time (user + system, milliseconds) any process of the running command has used
  // (RLIMIT_CPU is per process): /bin/sh and what it started, found through
  // /proc/PID/task/TID/children. -1 when none runs or /proc cannot tell.
  int64_t MaxCpuMillis() const;

 private:
  Status Start();
  // Reaps the exited child; returns "exited with status N" / "was killed by signal N (NAME)".
  std::string Reap();
  Status WriteAll(const std::string& bytes, int64_t deadline_ms);
  Result<std::string> ReadLine(int64_t deadline_ms);
  // one_line: reads what follows the reply until the output pauses; DataError or TooLarge.
  Status CheckNothingFollows(size_t reply_bytes, int64_t deadline_ms);
  // Waits for `fd` to be ready for `events` (and logs stderr meanwhile) until the deadline, at
  // most one second or 100 ms when cancel is set. Unavailable when cancelled.
  Status Wait(int fd, short events, int64_t deadline_ms);
  void DropStrayOutput();
  void DrainStderr(bool flush_partial);
  std::string Named() const;

  std::string command_;
  CoProcessOptions o_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1, err_child_ = -1;
  std::string buffer_;      // bytes read past the last line returned
  std::string err_buffer_;  // stderr bytes read past the last whole line logged
  int err_lines_ = 0;       // stderr lines logged in this exchange (a flood is cut short)
  int64_t err_dropped_ = 0;
  int starts_ = 0;
  std::string last_exit_;
};

// Whether this process may put a child into new user and network namespaces (a child tries it
// and reports). OK, or Unavailable saying why not ("unshare: Operation not permitted").
Status ProbeNetworkIsolation();

}  // namespace rl
