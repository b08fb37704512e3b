#include "rl/health/spare.h"

#include <errno.h>
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>

namespace rl::health {
namespace {

constexpr size_t kMaxActivationBytes = 64 * 1024;

[[noreturn]] void Exit(int code, const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "spare: %s\n", why.c_str());
  std::fflush(nullptr);
  ::_exit(code);
}

}  // namespace

std::string EncodeActivation(const std::map<std::string, std::string>& env) {
  std::string out;
  for (const auto& [k, v] : env) out += k + "=" + v + "\n";
  return out + "\n";
}

Result<std::map<std::string, std::string>> DecodeActivation(const std::string& text) {
  std::map<std::string, std::string> env;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) break;
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) return env;  // the end of the message
    size_t eq = line.find('=');
    if (eq == 0 || eq == std::string::npos) return Status::DataError("activation line '" + line + "' is not KEY=VALUE");
    env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return Status::DataError("activation message without its closing empty line");
}

void WaitIfSpare() {
  const char* text = std::getenv(kSpareFdEnv);
  if (text == nullptr) return;
  std::string value = text;
  ::unsetenv(kSpareFdEnv);  // not for the processes this one starts
  int fd = -1;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), fd);
  if (ec != std::errc() || end != value.data() + value.size() || fd < 0) {
    Exit(78, std::string(kSpareFdEnv) + "='" + value + "' is not a file descriptor");
  }
  std::string got;
  char buf[512];
  while (got.find("\n\n") == std::string::npos && got != "\n") {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EBADF) Exit(78, std::string(kSpareFdEnv) + "=" + value + " is not an open descriptor");
    if (n <= 0) Exit(0, "");  // closed before an activation: never start work
    got.append(buf, static_cast<size_t>(n));
    if (got.size() > kMaxActivationBytes) Exit(76, "activation message longer than 64 KiB");
  }
  ::close(fd);
  Result<std::map<std::string, std::string>> env = DecodeActivation(got);
  if (!env.ok()) Exit(76, env.status().message());
  for (const auto& [k, v] : *env) ::setenv(k.c_str(), v.c_str(), 1);
}

}  // namespace rl::health
