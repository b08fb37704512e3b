#include "rl/profile/queue_target.h"

#include <unistd.h>

#include "rl/core/log.h"
#include "rl/queue/client.h"

namespace rl::profile {
namespace {

constexpr int kStartTimeoutMs = 10000;

// One ping, retried within give_up_s.
Status Ping(const std::string& endpoint, double give_up_s) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.give_up_s = give_up_s;
  o.attempt_timeout_ms = 300;
  o.backoff_min_ms = 20;
  o.backoff_max_ms = 200;
  queue::QueueClient client(o);
  return client.Ping();
}

}  // namespace

std::string FindRlQueue() {
  std::string self = SelfDir();
  for (const std::string& c : {self + "/../rl-queue/rl-queue", self + "/rl-queue"}) {
    if (::access(c.c_str(), X_OK) == 0) return c;
  }
  return FindOnPath("rl-queue");
}

Result<std::unique_ptr<QueueTarget>> QueueTarget::StartProcess(const std::string& binary, const std::string& fsync) {
  std::unique_ptr<QueueTarget> t(new QueueTarget());
  t->kind_ = "process";
  RL_ASSIGN_OR_RETURN(t->dir_, MakeTempDir("rl-profile-queue"));
  RL_ASSIGN_OR_RETURN(int port, FreeTcpPort());
  t->endpoint_ = "tcp://127.0.0.1:" + std::to_string(port);
  RL_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn({binary, "--log-level", "warn", "serve", "--bind",
                                                               t->endpoint_, "--dir", t->dir_, "--fsync", fsync}));
  t->child_.emplace(std::move(child));
  std::string endpoint = t->endpoint_;
  RL_RETURN_IF_ERROR(t->child_->WaitReady(kStartTimeoutMs, [endpoint] { return Ping(endpoint, 0.3); }));
  return t;
}

Result<std::unique_ptr<QueueTarget>> QueueTarget::StartThread(const std::string& fsync) {
  std::unique_ptr<QueueTarget> t(new QueueTarget());
  t->kind_ = "thread";
  RL_ASSIGN_OR_RETURN(t->dir_, MakeTempDir("rl-profile-queue"));
  queue::ServerOptions o;
  o.bind = "tcp://127.0.0.1:0";
  o.dir = t->dir_;
  RL_ASSIGN_OR_RETURN(o.fsync, queue::ParseFsyncPolicy(fsync));
  RL_ASSIGN_OR_RETURN(t->server_, queue::Server::Open(std::move(o)));
  t->endpoint_ = t->server_->endpoint();
  QueueTarget* raw = t.get();
  t->thread_ = std::thread([raw] { raw->thread_status_ = raw->server_->Run(raw->stop_); });
  RL_RETURN_IF_ERROR(Ping(t->endpoint_, kStartTimeoutMs / 1000.0));
  return t;
}

std::unique_ptr<QueueTarget> QueueTarget::External(const std::string& endpoint) {
  std::unique_ptr<QueueTarget> t(new QueueTarget());
  t->endpoint_ = endpoint;
  return t;
}

Status QueueTarget::Alive() { return child_ ? child_->Alive() : Status::OK(); }

Status QueueTarget::Stop() {
  Status s;
  if (child_) {
    s = child_->Stop(5000);
    child_.reset();
  }
  if (thread_.joinable()) {
    stop_ = true;
    thread_.join();
    s = thread_status_;
  }
  server_.reset();
  if (!dir_.empty()) RemoveTree(dir_);
  dir_.clear();
  return s;
}

QueueTarget::~QueueTarget() {
  Status s = Stop();
  if (!s.ok()) spdlog::warn("rl-queue server: {}", s.ToString());
}

}  // namespace rl::profile
