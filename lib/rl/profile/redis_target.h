// RedisTarget: a redis-server child on a free 127.0.0.1 port, in a fresh /tmp directory that also
// holds its log and its append-only file; the Redis baselines run against it. No RDB saves; the
// append-only file off ("off") or on, with appendfsync "everysec" or "always".
// Destruction shuts it down (SIGTERM, then SIGKILL) and removes the directory.
// Thread safety: create and destroy on one thread.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "rl/core/status.h"
#include "rl/profile/child_process.h"

namespace rl::profile {

class RedisTarget {
 public:
  // `binary`: the redis-server path; `appendfsync`: off, everysec or always.
  static Result<std::unique_ptr<RedisTarget>> Start(const std::string& binary, const std::string& appendfsync);
  ~RedisTarget();
  int port() const { return port_; }
  const std::string& appendfsync() const { return appendfsync_; }
  Status Alive() { return child_ ? child_->Alive() : Status::Unavailable("redis-server is not running"); }
  Status Stop();

 private:
  RedisTarget() = default;
  int port_ = 0;
  std::string appendfsync_;
  std::string dir_;
  std::optional<ChildProcess> child_;
};

}  // namespace rl::profile
