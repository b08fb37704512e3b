#include "rl/core/compute_process.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace rl {
namespace {

bool TunablesSetMalloc() {
  const char* t = std::getenv("GLIBC_TUNABLES");
  return t != nullptr && std::strstr(t, "glibc.malloc.") != nullptr;
}

}  // namespace

void PrepareComputeProcess(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) {
    ::setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    ::execv("/proc/self/exe", argv);  // returns only on failure: go on with the active policy
  }
  if (std::getenv("MALLOC_MMAP_MAX_") == nullptr && std::getenv("MALLOC_TRIM_THRESHOLD_") == nullptr &&
      !TunablesSetMalloc()) {
    ::mallopt(M_MMAP_MAX, 0);
    ::mallopt(M_TRIM_THRESHOLD, -1);  // as an unsigned size: never trim
    // The same for the processes this one starts (the python3-torch baseline of rl-profile decode
    // runs under the allocator settings ours runs under).
    ::setenv("MALLOC_MMAP_MAX_", "0", 1);
    ::setenv("MALLOC_TRIM_THRESHOLD_", "1099511627776", 1);
  }
}

}  // namespace rl
