// QueueTarget: the rl-queue server a benchmark runs against. Three kinds:
//   process  - a child `rl-queue serve` on a free 127.0.0.1 port and a fresh /tmp directory. The
//              default: the server has its own process and ZeroMQ I/O thread, as in deployment
//              and as redis-server has, so the comparison is like for like.
//   thread   - rl::queue::Server on a thread of this process (tests; no binary needed). It shares
//              the process-wide ZeroMQ context, hence one I/O thread, with every client.
//   external - a server someone else runs (--connect); nothing is started or stopped.
// Destruction stops what was started and removes its directory.
// Thread safety: create and destroy on one thread.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "rl/core/status.h"
#include "rl/profile/child_process.h"
#include "rl/queue/server.h"

namespace rl::profile {

class QueueTarget {
 public:
  static Result<std::unique_ptr<QueueTarget>> StartProcess(const std::string& binary, const std::string& fsync);
  static Result<std::unique_ptr<QueueTarget>> StartThread(const std::string& fsync);
  static std::unique_ptr<QueueTarget> External(const std::string& endpoint);
  ~QueueTarget();

  const std::string& endpoint() const { return endpoint_; }
  const char* kind() const { return kind_; }
  // OK while the server still runs (an external one is assumed to).
  Status Alive();
  // Stops the server; an error when it had failed on its own or will not stop.
  Status Stop();

 private:
  QueueTarget() = default;
  const char* kind_ = "external";
  std::string endpoint_;
  std::string dir_;
  std::optional<ChildProcess> child_;
  std::unique_ptr<queue::Server> server_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  Status thread_status_;
};

// The rl-queue binary beside this one (build tree: ../rl-queue/rl-queue; installed: ./rl-queue),
// else on PATH; empty when there is none.
std::string FindRlQueue();

}  // namespace rl::profile
