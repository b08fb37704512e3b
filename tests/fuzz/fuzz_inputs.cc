// libFuzzer target: see targets.h.
#include "targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  rl::fuzz::FuzzInputs(data, size);
  return 0;
}
