// libFuzzer target: see targets.h.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rl::fuzz::FuzzModelFiles(data, size);
  return 0;
}
