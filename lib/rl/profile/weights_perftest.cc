// ucx_perftest as a baseline: a server and a client process, the client's final line parsed.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <sstream>
#include <thread>

#include "rl/core/log.h"
#include "rl/profile/child_process.h"
#include "rl/profile/weights_profile.h"

namespace rl::profile {
namespace {

// Forks argv with UCX_TLS=tls; stdout into *out (when given), else /dev/null.
pid_t Start(const std::vector<std::string>& argv, const std::string& tls, int* out_fd) {
  int fds[2] = {-1, -1};
  if (out_fd && ::pipe(fds) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("UCX_TLS", tls.c_str(), 1);
    int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(out_fd ? fds[1] : devnull, 1);
    ::dup2(devnull, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (out_fd) {
    ::close(fds[1]);
    *out_fd = fds[0];
  }
  return pid;
}

int Reap(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

}  // namespace

Result<double> PerftestGBps(const std::string& tls, const std::string& test, size_t message_bytes, size_t iterations,
                            bool peer_failure) {
  std::string exe = FindOnPath("ucx_perftest");
  if (exe.empty()) return Status::NotFound("ucx_perftest is not on PATH (Debian package ucx-utils)");
  for (int attempt = 0; attempt < 3; ++attempt) {
    RL_ASSIGN_OR_RETURN(int port, FreeTcpPort());
    std::vector<std::string> server_args = {exe, "-p", std::to_string(port)};
    std::vector<std::string> client_args = {exe,  "127.0.0.1", "-p", std::to_string(port), "-t", test, "-s",
                                            std::to_string(message_bytes), "-n", std::to_string(iterations),
                                            "-w", "2", "-f"};
    if (peer_failure) {
      server_args.push_back("-e");
      client_args.push_back("-e");
    }
    pid_t server = Start(server_args, tls, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the server's listen; a miss is retried
    int fd = -1;
    pid_t client = Start(client_args, tls, &fd);
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0) text.append(buf, static_cast<size_t>(n));
    ::close(fd);
    int rc = Reap(client);
    ::kill(server, SIGTERM);
    Reap(server);
    if (rc != 0) {
      spdlog::debug("ucx_perftest {} over {} exited {}; again", test, tls, rc);
      continue;
    }
    // -f prints one line of numbers: iterations, p50, avg and overall latency (us), avg and
    // overall bandwidth (MB/s, 2^20 bytes), avg and overall message rate.
    std::istringstream lines(text);
    std::string line, last;
    while (std::getline(lines, line)) {
      if (line.find_first_not_of(" 0123456789.") == std::string::npos && !line.empty()) last = line;
    }
    std::istringstream cols(last);
    double v[8] = {0};
    int k = 0;
    while (k < 8 && cols >> v[k]) ++k;
    if (k < 6) return Status::Protocol("cannot read ucx_perftest's figures: '" + last + "'");
    return v[5] * 1048576.0 / 1e9;
  }
  return Status::Unavailable("ucx_perftest " + test + " over " + tls + " failed 3 times");
}

Result<size_t> ParseBytes(const std::string& s) {
  if (s.empty()) return Status::InvalidArgument("empty size");
  size_t mult = 1;
  std::string digits = s;
  switch (s.back()) {
    case 'K': case 'k': mult = size_t{1} << 10; digits.pop_back(); break;
    case 'M': case 'm': mult = size_t{1} << 20; digits.pop_back(); break;
    case 'G': case 'g': mult = size_t{1} << 30; digits.pop_back(); break;
    default: break;
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument("size '" + s + "' is not a number with K, M or G");
  }
  return std::stoull(digits) * mult;
}

}  // namespace rl::profile
