// How the process-group code turns the exceptions of its peers' libraries into Status values:
// c10d, Gloo and the c10d store throw when a peer's connection drops, a peer hangs past the
// timeout or the store's server is gone, and c10::Error appends a backtrace to the message. The
// Status carries the message's first line, as Unavailable: the group is broken, not the caller.
// Thread safety: stateless.
#pragma once

#include <exception>
#include <string>

#include "rl/core/status.h"

namespace rl::dist {

// The first line of e.what() (c10::Error's backtrace left out).
inline std::string FirstLine(const std::exception& e) {
  std::string m = e.what();
  const size_t cut = m.find('\n');
  if (cut != std::string::npos) m.resize(cut);
  return m;
}

// Runs f(); an exception becomes Unavailable("<what>: <first line>").
template <typename F>
Status CallPeers(const std::string& what, F&& f) {
  try {
    f();
    return Status::OK();
  } catch (const std::exception& e) {
    return Status::Unavailable(what + ": " + FirstLine(e));
  }
}

}  // namespace rl::dist
