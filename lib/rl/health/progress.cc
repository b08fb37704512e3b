#include "rl/health/progress.h"

namespace rl::health {

std::map<std::string, uint64_t> ProgressCounters::Snapshot() const {
  std::map<std::string, uint64_t> out;
  auto put = [&](const char* name, uint64_t v) {
    if (v != 0) out[name] = v;
  };
  put("tokens", tokens.load(std::memory_order_relaxed));
  put("rows", rows.load(std::memory_order_relaxed));
  put("micro_batches", micro_batches.load(std::memory_order_relaxed));
  put("requests", requests.load(std::memory_order_relaxed));
  put("steps", steps.load(std::memory_order_relaxed));
  return out;
}

ProgressCounters& Progress() {
  static ProgressCounters counters;
  return counters;
}

}  // namespace rl::health
