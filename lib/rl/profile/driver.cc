#include "rl/profile/driver.h"

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

int64_t PayloadStamp(const char* data, size_t size) {
  int64_t ns = 0;
  if (size >= sizeof(ns)) std::memcpy(&ns, data, sizeof(ns));
  return ns;
}

}  // namespace rl::profile
