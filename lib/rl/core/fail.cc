#include "rl/core/fail.h"

#include <iostream>

namespace rl {

int Fail(std::string_view tool, const Status& status) {
  std::cerr << tool << ": " << status.message() << "\n";
  return ExitCodeFor(status);
}

}  // namespace rl
