// Rows for the Store tests: a new row, or columns added to an existing one. Test-only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "rl/queue/store.h"

namespace rl::queue::testing {

inline PutRow NewRow(std::vector<std::pair<std::string, Value>> cols) {
  PutRow r;
  r.is_new = true;
  r.columns.assign(cols.begin(), cols.end());
  return r;
}

inline PutRow AddTo(uint64_t index, std::vector<std::pair<std::string, Value>> cols) {
  PutRow r;
  r.index = index;
  r.columns.assign(cols.begin(), cols.end());
  return r;
}

}  // namespace rl::queue::testing
