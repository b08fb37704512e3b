// WorkerPool: runs tool calls on a fixed number of worker threads. Each worker owns one
// persistent ToolProcess per tool, started on that worker's first call of the tool, so at most
// `workers` processes of each tool run at once and a process is only ever used by its worker
// (the tool protocol has no request ids: one call at a time per process). Calls wait in one FIFO
// queue; a call of an unknown tool is answered at once without a worker.
// Thread safety: Submit from any thread; `done` runs on a worker thread (or, for an unknown
// tool, on the caller's).
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rl/env/tool.h"

namespace rl::env {

struct PoolOptions {
  std::map<std::string, std::string> tools;  // name -> command
  int workers = 2;
  ToolLimits limits;
};

class WorkerPool {
 public:
  using Done = std::function<void(ToolResult)>;

  explicit WorkerPool(PoolOptions options);
  // Ends calls in progress (their processes are killed) and joins the workers; calls still
  // queued get no `done`.
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void Submit(ToolCall call, Done done);
  bool HasTool(const std::string& name) const { return o_.tools.count(name) > 0; }
  std::vector<std::string> ToolNames() const;
  int workers() const { return o_.workers; }
  // Calls queued and not yet taken by a worker.
  size_t queued();

 private:
  struct Job {
    ToolCall call;
    Done done;
  };
  void Work();

  PoolOptions o_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> jobs_;
  std::vector<std::thread> threads_;  // last: they start after the members they use
};

}  // namespace rl::env
