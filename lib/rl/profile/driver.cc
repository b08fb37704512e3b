#include "rl/profile/driver.h"

#include <chrono>
#include <cstring>

namespace rl::profile {

void Taken::Clear() {
  lease = 0;
  indices.clear();
  ids.clear();
  stamps_ns.clear();
}

std::string Taken::Key(size_t i) const {
  return i < ids.size() ? ids[i] : std::to_string(indices[i]);
}

Status QueueDriver::AckPipelined(const std::vector<Taken>& taken, int, std::vector<double>* latency_us) {
  for (const Taken& t : taken) {
    auto t0 = std::chrono::steady_clock::now();
    RL_RETURN_IF_ERROR(Ack(t));
    latency_us->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return Status::OK();
}

int64_t PayloadStamp(const char* data, size_t size) {
  int64_t ns = 0;
  if (size >= sizeof(ns)) std::memcpy(&ns, data, sizeof(ns));
  return ns;
}

}  // namespace rl::profile
