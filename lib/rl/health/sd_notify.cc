#include "rl/health/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace rl::health {

bool SdNotifyEnabled() {
  const char* path = std::getenv("NOTIFY_SOCKET");
  return path != nullptr && (path[0] == '/' || path[0] == '@');
}

bool SdNotify(const std::string& state) {
  return SdNotifyEnabled() && SdNotifyTo(std::getenv("NOTIFY_SOCKET"), state);
}

bool SdNotifyTo(const std::string& path, const std::string& state) {
  if (path.empty() || (path[0] != '/' && path[0] != '@')) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.data(), path.size());
  socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (path[0] == '@') addr.sun_path[0] = '\0';  // abstract socket: the name is not NUL-terminated
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  ssize_t n = ::sendto(fd, state.data(), state.size(), MSG_NOSIGNAL | MSG_DONTWAIT, reinterpret_cast<sockaddr*>(&addr), len);
  ::close(fd);
  return n == static_cast<ssize_t>(state.size());
}

}  // namespace rl::health
