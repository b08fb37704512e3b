#include "rl/profile/redis_target.h"

#include "rl/core/log.h"

namespace rl::profile {

constexpr int kStartTimeoutMs = 10000;

Result<std::unique_ptr<RedisTarget>> RedisTarget::Start(const std::string& binary, const std::string& appendfsync) {
  if (appendfsync != "off" && appendfsync != "everysec" && appendfsync != "always") {
    return Status::InvalidArgument("Redis appendfsync must be off, everysec or always, not '" + appendfsync + "'");
  }
  std::unique_ptr<RedisTarget> t(new RedisTarget());
  t->appendfsync_ = appendfsync;
  bool aof = appendfsync != "off";
  RL_ASSIGN_OR_RETURN(t->dir_, MakeTempDir("rl-profile-redis"));
  RL_ASSIGN_OR_RETURN(t->port_, FreeTcpPort());
  RL_ASSIGN_OR_RETURN(ChildProcess child,
                      ChildProcess::Spawn({binary, "--port", std::to_string(t->port_), "--bind", "127.0.0.1",
                                           "--save", "", "--appendonly", aof ? "yes" : "no",
                                           "--appendfsync", aof ? appendfsync : "no",
                                           "--protected-mode", "yes", "--daemonize", "no", "--loglevel", "warning",
                                           "--dir", t->dir_, "--logfile", t->dir_ + "/redis.log"}));
  t->child_.emplace(std::move(child));
  int port = t->port_;
  RL_RETURN_IF_ERROR(t->child_->WaitReady(kStartTimeoutMs, [port] { return ProbeTcp(port); }));
  return t;
}

Status RedisTarget::Stop() {
  Status s;
  if (child_) {
    s = child_->Stop(5000);
    child_.reset();
  }
  if (!dir_.empty()) RemoveTree(dir_);
  dir_.clear();
  return s;
}

RedisTarget::~RedisTarget() {
  Status s = Stop();
  if (!s.ok()) spdlog::warn("redis-server: {}", s.ToString());
}

}  // namespace rl::profile
