#include "rl/reward/coprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>

#include "rl/core/clock.h"
#include "rl/core/log.h"

namespace rl::reward {
namespace {

void CloseFd(int* fd) {
  if (*fd >= 0) ::close(*fd);
  *fd = -1;
}

// Turns a child's bytes into something a log line can hold.
std::string Printable(const std::string& s) {
  std::string out = s.substr(0, 200);
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s.size() > 200 ? out + "..." : out;
}

}  // namespace

Status CoProcess::Start() {
  std::signal(SIGPIPE, SIG_IGN);
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return Status::Unavailable(std::string("exec: pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return Status::Unavailable(std::string("exec: pipe: ") + std::strerror(errno));
  }
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    return Status::Unavailable(std::string("exec: fork: ") + std::strerror(errno));
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &sa, nullptr);
    ::execl("/bin/sh", "sh", "-c", command_.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so Kill never races the child's own setpgid
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  ::fcntl(to_child_, F_SETFL, ::fcntl(to_child_, F_GETFL) | O_NONBLOCK);
  ::fcntl(from_child_, F_SETFL, ::fcntl(from_child_, F_GETFL) | O_NONBLOCK);
  pid_ = pid;
  buffer_.clear();
  ++starts_;
  spdlog::debug("exec: started '{}' as pid {}", command_, pid);
  return Status::OK();
}

void CoProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  Reap();
}

std::string CoProcess::Reap() {
  CloseFd(&to_child_);
  CloseFd(&from_child_);
  buffer_.clear();
  if (pid_ <= 0) return "is not running";
  // A command that closed its output but goes on running is not waited for: after 200 ms it is
  // killed, so a Call never hangs here.
  int wstatus = 0;
  pid_t r = 0;
  for (int i = 0; i < 20 && r == 0; ++i) {
    r = ::waitpid(pid_, &wstatus, WNOHANG);
    if (r == 0) ::usleep(10000);
    if (r < 0 && errno == EINTR) r = 0;
  }
  if (r == 0) {
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    do {
      r = ::waitpid(pid_, &wstatus, 0);
    } while (r < 0 && errno == EINTR);
  }
  pid_ = -1;
  if (r > 0 && WIFEXITED(wstatus)) return "exited with status " + std::to_string(WEXITSTATUS(wstatus));
  if (r > 0 && WIFSIGNALED(wstatus)) return "was killed by signal " + std::to_string(WTERMSIG(wstatus));
  return "is gone";
}

void CoProcess::DropStrayOutput() {
  char chunk[4096];
  std::string stray = buffer_;
  ssize_t n;
  while ((n = ::read(from_child_, chunk, sizeof(chunk))) > 0) stray.append(chunk, static_cast<size_t>(n));
  if (n == 0) {  // it exited since the last exchange
    std::string how = Reap();
    spdlog::warn("exec: '{}' {}; restarting it", command_, how);
    return;
  }
  if (stray.empty()) return;
  spdlog::warn("exec: '{}' wrote output nobody asked for ('{}'); restarting it", command_, Printable(stray));
  Kill();
}

Status CoProcess::WriteAll(const std::string& bytes, int64_t deadline_ms) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(to_child_, bytes.data() + done, bytes.size() - done);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN) {
      return Status::Unavailable("exec: '" + command_ + "' " + Reap() + " (it stopped reading its input)");
    }
    int64_t left = deadline_ms - MonoMillis();
    if (left <= 0) return Status::Timeout("");
    struct pollfd p = {to_child_, POLLOUT, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
  }
  return Status::OK();
}

Result<std::string> CoProcess::ReadLine(int64_t deadline_ms) {
  for (;;) {
    size_t nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    char chunk[4096];
    ssize_t n = ::read(from_child_, chunk, sizeof(chunk));
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      std::string partial = buffer_;
      std::string how = Reap();
      std::string tail = partial.empty() ? "" : " after writing '" + Printable(partial) + "' without a newline";
      return Status::Unavailable("exec: '" + command_ + "' " + how + tail);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::Unavailable("exec: read: " + std::string(std::strerror(errno)));
    int64_t left = deadline_ms - MonoMillis();
    if (left <= 0) return Status::Timeout("");
    struct pollfd p = {from_child_, POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
  }
}

Result<std::string> CoProcess::Call(const std::string& line, int timeout_ms) {
  if (pid_ > 0) DropStrayOutput();
  if (pid_ <= 0) RL_RETURN_IF_ERROR(Start());
  int64_t deadline = MonoMillis() + timeout_ms;
  Status written = WriteAll(line + "\n", deadline);
  Result<std::string> reply = written.ok() ? ReadLine(deadline) : Result<std::string>(written);
  if (!reply.ok() && reply.status().code() == Code::kTimeout) {
    Kill();
    return Status::Timeout(fmt::format("exec: '{}' gave no reply within {:g} s; it was killed and will be restarted",
                                       command_, timeout_ms / 1000.0));
  }
  return reply;
}

}  // namespace rl::reward
