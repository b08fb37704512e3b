#include "rl/core/coprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "rl/core/clock.h"
#include "rl/core/log.h"

namespace rl {
namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr int kMaxStderrLines = 100;     // per exchange; a flood is counted, not logged
constexpr size_t kMaxStderrLine = 2000;  // a longer stderr line is logged cut
constexpr int64_t kPauseMs = 50;         // one_line: output after the reply ends after this pause

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

const char* SignalName(int sig) {
  switch (sig) {
    case SIGKILL: return "SIGKILL";
    case SIGSEGV: return "SIGSEGV";
    case SIGABRT: return "SIGABRT";
    case SIGBUS: return "SIGBUS";
    case SIGFPE: return "SIGFPE";
    case SIGILL: return "SIGILL";
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGPIPE: return "SIGPIPE";
    case SIGXCPU: return "SIGXCPU";
    case SIGXFSZ: return "SIGXFSZ";
    default: return "";
  }
}

// Child side, between fork and exec: only async-signal-safe calls. Strings are built before fork.
void WriteFile(const char* path, const char* text) {
  int fd = ::open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t n = ::write(fd, text, std::strlen(text));
  (void)n;
  ::close(fd);
}

// Puts `from` at descriptor `to`, inheritable across exec (dup2 onto itself would keep CLOEXEC).
void MoveFd(int from, int to) {
  if (from == to) {
    ::fcntl(to, F_SETFD, 0);
  } else {
    ::dup2(from, to);
  }
}

struct ChildPlan {
  char uid_map[64], gid_map[64];
};

// New user and network namespaces; our uid and gid map to themselves, so the command sees the
// same ids (and root stays root inside its own namespace, with no power outside it).
bool Isolate(const ChildPlan& plan) {
  if (::unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) return false;
  WriteFile("/proc/self/uid_map", plan.uid_map);
  WriteFile("/proc/self/setgroups", "deny");
  WriteFile("/proc/self/gid_map", plan.gid_map);
  return true;
}

void SetLimit(int resource, rlim_t soft, rlim_t hard) {
  struct rlimit rl;
  rl.rlim_cur = soft;
  rl.rlim_max = hard;
  ::setrlimit(resource, &rl);
}

}  // namespace

CoProcess::CoProcess(std::string command, CoProcessOptions options)
    : command_(std::move(command)), o_(std::move(options)) {}

std::string CoProcess::Named() const { return o_.name.empty() ? "'" + command_ + "'" : o_.name; }

Status CoProcess::Start() {
  std::signal(SIGPIPE, SIG_IGN);
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in[0], in[1], out[0], out[1], err[0], err[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || (o_.log_stderr && ::pipe2(err, O_CLOEXEC) != 0)) {
    std::string why = std::strerror(errno);
    close_all();
    return Status::Unavailable(o_.label + ": pipe: " + why);
  }
  ChildPlan plan;
  std::snprintf(plan.uid_map, sizeof(plan.uid_map), "%u %u 1\n", ::geteuid(), ::geteuid());
  std::snprintf(plan.gid_map, sizeof(plan.gid_map), "%u %u 1\n", ::getegid(), ::getegid());
  static const char kNoIsolation[] = "cannot start the command without network (--no-network require)\n";
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    std::string why = std::strerror(errno);
    close_all();
    return Status::Unavailable(o_.label + ": fork: " + why);
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // sent when the thread that forked ends
    if (::getppid() != parent) ::_exit(127);
    MoveFd(in[0], 0);
    MoveFd(out[1], 1);
    if (err[1] >= 0) MoveFd(err[1], 2);
    struct sigaction sa;
    std::memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_DFL;
    ::sigaction(SIGPIPE, &sa, nullptr);
    if (o_.memory_bytes > 0) SetLimit(RLIMIT_AS, o_.memory_bytes, o_.memory_bytes);
    // The soft limit sends SIGXCPU, the hard one a second later SIGKILL.
    if (o_.cpu_seconds > 0) SetLimit(RLIMIT_CPU, o_.cpu_seconds, o_.cpu_seconds + 1);
    if (o_.network != NetworkIsolation::kOff && !Isolate(plan) && o_.network == NetworkIsolation::kRequire) {
      ssize_t n = ::write(2, kNoIsolation, sizeof(kNoIsolation) - 1);
      (void)n;
      ::_exit(126);
    }
    ::close_range(3, ~0U, 0);  // none of our descriptors (sockets, logs) goes to the tool
    ::execl("/bin/sh", "sh", "-c", command_.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here, so Kill never races the child's own setpgid
  ::close(in[0]);
  ::close(out[1]);
  if (err[1] >= 0) ::close(err[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  err_child_ = err[0];
  for (int fd : {to_child_, from_child_, err_child_}) {
    if (fd >= 0) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  pid_ = pid;
  buffer_.clear();
  err_buffer_.clear();
  ++starts_;
  spdlog::debug("{}: started {} as pid {}", o_.label, Named(), pid);
  return Status::OK();
}

void CoProcess::Kill() {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  Reap();
}

void CoProcess::DrainStderr(bool flush_partial) {
  if (err_child_ < 0) return;
  char chunk[4096];
  ssize_t n;
  while ((n = ::read(err_child_, chunk, sizeof(chunk))) > 0) err_buffer_.append(chunk, static_cast<size_t>(n));
  // End of file: the command closed its stderr (2>/dev/null, exec 2>&-). Left open, the pipe
  // would poll as hung up at once, forever, and the wait loops would spin.
  if (n == 0) {
    CloseFd(&err_child_);
    flush_partial = true;
  }
  auto log_line = [&](std::string line) {
    if (err_lines_ >= kMaxStderrLines) {
      ++err_dropped_;
      return;
    }
    ++err_lines_;
    if (line.size() > kMaxStderrLine) line = line.substr(0, kMaxStderrLine) + "...";
    spdlog::info("{} {} (pid {}): {}", o_.label, Named(), pid_, line);
  };
  size_t start = 0, nl;
  while ((nl = err_buffer_.find('\n', start)) != std::string::npos) {
    log_line(err_buffer_.substr(start, nl - start));
    start = nl + 1;
  }
  err_buffer_.erase(0, start);
  // A partial line is held for its end, unless the command is gone or it is already too long.
  if (!err_buffer_.empty() && (flush_partial || err_buffer_.size() > kMaxStderrLine)) {
    log_line(err_buffer_);
    err_buffer_.clear();
  }
}

std::string CoProcess::Reap() {
  DrainStderr(true);
  CloseFd(&to_child_);
  CloseFd(&from_child_);
  CloseFd(&err_child_);
  buffer_.clear();
  err_buffer_.clear();
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
  ::kill(-pid_, SIGKILL);  // whatever it started goes with it
  pid_ = -1;
  if (r > 0 && WIFEXITED(wstatus)) {
    int code = WEXITSTATUS(wstatus);
    last_exit_ = "exited with status " + std::to_string(code);
    // /bin/sh that waited for its command exits 128 + N when a signal N killed it.
    std::string name = code > 128 ? SignalName(code - 128) : "";
    if (!name.empty()) last_exit_ += " (its command was killed by signal " + std::to_string(code - 128) + ", " + name + ")";
  } else if (r > 0 && WIFSIGNALED(wstatus)) {
    int sig = WTERMSIG(wstatus);
    std::string name = SignalName(sig);
    last_exit_ = "was killed by signal " + std::to_string(sig) + (name.empty() ? "" : " (" + name + ")");
  } else {
    last_exit_ = "is gone";
  }
  return last_exit_;
}

namespace {

// CPU ticks (user + system) of one process; -1 when /proc cannot tell.
int64_t CpuTicks(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos) return -1;
  // Fields after the name: state is field 3; utime and stime are fields 14 and 15.
  unsigned long long utime = 0, stime = 0;
  if (std::sscanf(stat.c_str() + paren + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                  &stime) != 2) {
    return -1;
  }
  return static_cast<int64_t>(utime + stime);
}

// The children of every thread of `pid`.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* dir = ::opendir(tasks.c_str());
  if (dir == nullptr) return out;
  while (struct dirent* e = ::readdir(dir)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(tasks + "/" + e->d_name + "/children");
    long child;
    while (f >> child) out.push_back(static_cast<pid_t>(child));
  }
  ::closedir(dir);
  return out;
}

}  // namespace

int64_t CoProcess::MaxCpuMillis() const {
  if (pid_ <= 0) return -1;
  int64_t most = CpuTicks(pid_);
  if (most < 0) return -1;
  std::vector<pid_t> todo = ChildrenOf(pid_);
  for (size_t i = 0; i < todo.size() && i < 4096; ++i) {
    most = std::max(most, CpuTicks(todo[i]));
    for (pid_t c : ChildrenOf(todo[i])) todo.push_back(c);
  }
  long ticks = ::sysconf(_SC_CLK_TCK);
  return ticks > 0 ? most * 1000 / ticks : -1;
}

void CoProcess::DropStrayOutput() {
  DrainStderr(false);
  char chunk[4096];
  std::string stray = buffer_;
  ssize_t n;
  while ((n = ::read(from_child_, chunk, sizeof(chunk))) > 0 && stray.size() < kChunk) {
    stray.append(chunk, static_cast<size_t>(n));
  }
  if (n == 0) {  // it exited since the last exchange
    std::string how = Reap();
    spdlog::warn("{}: {} {}; restarting it", o_.label, Named(), how);
    return;
  }
  if (stray.empty()) return;
  spdlog::warn("{}: {} wrote output nobody asked for ('{}'); restarting it", o_.label, Named(), Printable(stray));
  Kill();
}

Status CoProcess::Wait(int fd, short events, int64_t deadline_ms) {
  int64_t left = deadline_ms - MonoMillis();
  if (left <= 0) return Status::OK();
  int64_t slice = o_.cancel ? 100 : 1000;
  struct pollfd p[2] = {{fd, events, 0}, {err_child_, POLLIN, 0}};
  ::poll(p, err_child_ >= 0 ? 2 : 1, static_cast<int>(std::min<int64_t>(left, slice)));
  if (err_child_ >= 0 && p[1].revents != 0) DrainStderr(false);
  if (o_.cancel && o_.cancel->load()) return Status::Unavailable(o_.label + ": stopping");
  return Status::OK();
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
      return Status::Unavailable(o_.label + ": " + Named() + " " + Reap() + " (it stopped reading its input)");
    }
    if (deadline_ms - MonoMillis() <= 0) return Status::Timeout("");
    RL_RETURN_IF_ERROR(Wait(to_child_, POLLOUT, deadline_ms));
  }
  return Status::OK();
}

Result<std::string> CoProcess::ReadLine(int64_t deadline_ms) {
  for (;;) {
    size_t nl = buffer_.find('\n');
    size_t cap = o_.max_output_bytes;
    if (cap > 0 && (nl == std::string::npos ? buffer_.size() : nl) > cap) return Status::TooLarge("");
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      if (o_.one_line && !buffer_.empty()) RL_RETURN_IF_ERROR(CheckNothingFollows(nl + 1, deadline_ms));
      return line;
    }
    char chunk[kChunk];
    ssize_t n = ::read(from_child_, chunk, sizeof(chunk));
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      std::string partial = buffer_;
      std::string how = Reap();
      std::string tail = partial.empty() ? "" : " after writing '" + Printable(partial) + "' without a newline";
      return Status::Unavailable(o_.label + ": " + Named() + " " + how + tail);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) return Status::Unavailable(o_.label + ": read: " + std::string(std::strerror(errno)));
    if (deadline_ms - MonoMillis() <= 0) return Status::Timeout("");
    RL_RETURN_IF_ERROR(Wait(from_child_, POLLIN, deadline_ms));
  }
}

// Reads on while output keeps coming (a flood) and stops at the first pause: the verdict needs
// no more than the cap's worth of bytes or one pause.
Status CoProcess::CheckNothingFollows(size_t reply_bytes, int64_t deadline_ms) {
  size_t total = reply_bytes + buffer_.size();
  std::string head = buffer_.substr(0, 200);
  char chunk[kChunk];
  int64_t pause_end = MonoMillis() + kPauseMs;
  while (o_.max_output_bytes == 0 || total <= o_.max_output_bytes) {
    ssize_t n = ::read(from_child_, chunk, sizeof(chunk));
    int64_t until = std::min(pause_end, deadline_ms);
    if (n > 0) {
      total += static_cast<size_t>(n);
      pause_end = MonoMillis() + kPauseMs;
      if (MonoMillis() < deadline_ms) continue;  // without a cap a flood ends at the deadline
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0 || (n < 0 && errno != EAGAIN) || MonoMillis() >= until) {
      buffer_.clear();
      return Status::DataError("'" + Printable(head) + "'");
    }
    RL_RETURN_IF_ERROR(Wait(from_child_, POLLIN, until));
  }
  buffer_.clear();
  return Status::TooLarge("");
}

Result<std::string> CoProcess::Call(const std::string& line, int64_t timeout_ms) {
  err_lines_ = 0;
  err_dropped_ = 0;
  if (pid_ > 0) DropStrayOutput();
  if (pid_ <= 0) RL_RETURN_IF_ERROR(Start());
  int64_t deadline = MonoMillis() + timeout_ms;
  Status written = WriteAll(line + "\n", deadline);
  Result<std::string> reply = written.ok() ? ReadLine(deadline) : Result<std::string>(written);
  DrainStderr(false);
  if (err_dropped_ > 0) {
    spdlog::info("{} {}: {} more lines of stderr in this exchange not shown", o_.label, Named(), err_dropped_);
  }
  if (reply.ok()) return reply;
  Code code = reply.status().code();
  std::string named = o_.label + ": " + Named();
  if (code == Code::kTimeout) {
    Kill();
    return Status::Timeout(fmt::format("{} gave no reply within {:g} s; it was killed and will be restarted", named,
                                       timeout_ms / 1000.0));
  }
  if (code == Code::kTooLarge) {
    Kill();
    return Status::TooLarge(fmt::format("{} wrote more than {} bytes in reply; it was killed and will be restarted",
                                        named, o_.max_output_bytes));
  }
  if (code == Code::kDataError) {
    Kill();
    return Status::DataError(named + " wrote more than one line in reply (after it: " + reply.status().message() +
                             "); it was killed and will be restarted");
  }
  if (pid_ > 0 && o_.cancel && o_.cancel->load()) Kill();
  return reply;
}

Status ProbeNetworkIsolation() {
  pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) ::_exit(::unshare(CLONE_NEWUSER | CLONE_NEWNET) == 0 ? 0 : (errno & 0xff));
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return Status::OK();
  int err = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 0;
  return Status::Unavailable(std::string("unshare(CLONE_NEWUSER|CLONE_NEWNET): ") +
                             (err ? std::strerror(err) : "the probe died"));
}

}  // namespace rl
