// CoProcess: a shell command run as a child that answers one line for each line it is sent.
//
// The command runs as `/bin/sh -c COMMAND` in a process group of its own, with its stdin and
// stdout on pipes and its stderr shared with ours; it is killed when this process dies (Linux
// parent-death signal). It is started on the first Call and again on the first Call after it
// died or was killed, so a crashed command is restarted by simply calling again.
// Starting one ignores SIGPIPE for the whole process: a dead child shows as an error from Call,
// not as a signal.
// Thread safety: one thread at a time.
#pragma once

#include <sys/types.h>

#include <string>

#include "rl/core/status.h"

namespace rl::reward {

class CoProcess {
 public:
  explicit CoProcess(std::string command) : command_(std::move(command)) {}
  ~CoProcess() { Kill(); }
  CoProcess(const CoProcess&) = delete;
  CoProcess& operator=(const CoProcess&) = delete;

  // Writes `line` and a newline, and returns the next line the command writes (without its
  // newline), waiting at most timeout_ms for the whole exchange.
  //   Unavailable: the command could not be started, or exited (the message has its status).
  //   Timeout: no whole line in time; the command has been killed (the next Call restarts it).
  // Output the command wrote since the last reply (a line nobody asked for) means the exchange is
  // out of step: the command is restarted first, and the stray output logged. Stray output that
  // arrives only after this request was sent cannot be told from the reply (the protocol has no
  // request ids); a reply that does not parse restarts the command too.
  // REQUIRES: `line` holds no newline.
  Result<std::string> Call(const std::string& line, int timeout_ms);

  // Kills the command's process group (SIGKILL) and reaps it. Does nothing when none runs.
  void Kill();

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int starts() const { return starts_; }  // how many times the command was started

 private:
  Status Start();
  // Reaps the exited child; returns "exited with status N" / "was killed by signal N".
  std::string Reap();
  Status WriteAll(const std::string& bytes, int64_t deadline_ms);
  Result<std::string> ReadLine(int64_t deadline_ms);
  void DropStrayOutput();

  std::string command_;
  pid_t pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string buffer_;  // bytes read past the last line returned
  int starts_ = 0;
};

}  // namespace rl::reward
