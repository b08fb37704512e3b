// RedisTarget: a redis-server child on a free 127.0.0.1 port, persistence off (no RDB saves, no
// append-only file, so no fsync), in a fresh /tmp directory that also holds its log; the Redis
// baseline runs against it.
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
  // `binary`: the redis-server path.
  static Result<std::unique_ptr<RedisTarget>> Start(const std::string& binary);
  ~RedisTarget();
  int port() const { return port_; }
  Status Alive() { return child_ ? child_->Alive() : Status::Unavailable("redis-server is not running"); }
  Status Stop();

 private:
  RedisTarget() = default;
  int port_ = 0;
  std::string dir_;
  std::optional<ChildProcess> child_;
};

}  // namespace rl::profile
