#include "rl/env/pool.h"

#include <memory>

namespace rl::env {

WorkerPool::WorkerPool(PoolOptions options) : o_(std::move(options)) {
  if (o_.workers < 1) o_.workers = 1;
  for (int i = 0; i < o_.workers; ++i) threads_.emplace_back([this] { Work(); });
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

std::vector<std::string> WorkerPool::ToolNames() const {
  std::vector<std::string> names;
  for (const auto& [name, command] : o_.tools) names.push_back(name);
  return names;
}

size_t WorkerPool::queued() {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_.size();
}

void WorkerPool::Submit(ToolCall call, Done done) {
  if (!HasTool(call.name)) {
    std::string known;
    for (const auto& [name, command] : o_.tools) known += (known.empty() ? "" : ", ") + name;
    done(Failed(kKindUnknownTool, "no tool named '" + call.name + "' (tools: " + known + ")"));
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back({std::move(call), std::move(done)});
  }
  cv_.notify_one();
}

// A worker's processes live and die with its thread: the parent-death signal of a child goes
// when the thread that started it ends.
void WorkerPool::Work() {
  std::map<std::string, std::unique_ptr<ToolProcess>> processes;
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    std::unique_ptr<ToolProcess>& p = processes[job.call.name];
    if (!p) p = std::make_unique<ToolProcess>(job.call.name, o_.tools.at(job.call.name), o_.limits, &stop_);
    ToolResult r = p->Run(job.call);
    if (stop_) return;  // the process was cut short by the stop, not by its own fault
    job.done(std::move(r));
  }
}

}  // namespace rl::env
