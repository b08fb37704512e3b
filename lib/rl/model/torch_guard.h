// TorchGuard: the one place where libtorch exceptions become Status values.
//
// lib/ does not let exceptions escape. Every call into libtorch that can throw (a shape mismatch,
// an allocation failure) goes through TorchGuard, which turns c10::Error and std::exception into
// Status::Internal("<what>: <message>"). Inputs are validated before the call, so an exception
// that reaches here is a bug or resource exhaustion, not bad user input.
// Thread safety: stateless.
#pragma once

#include <c10/util/Exception.h>

#include <exception>
#include <new>
#include <stdexcept>
#include <string>

#include "rl/core/status.h"

namespace rl::model {

// Thrown by a tensor-parallel all-reduce whose group is broken (a rank died or timed out);
// TorchGuard turns it into Status::Unavailable, so that a caller can tell a lost peer from a bug.
class PeerLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Runs f() (returning Status or Result<T>) and converts any exception it throws.
template <typename F>
auto TorchGuard(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const PeerLost& e) {
    return Status::Unavailable(std::string(what) + ": " + e.what());
  } catch (const c10::Error& e) {
    return Status::Internal(std::string(what) + ": " + e.what_without_backtrace());
  } catch (const std::bad_alloc&) {
    return Status::Internal(std::string(what) + ": out of memory");
  } catch (const std::exception& e) {
    return Status::Internal(std::string(what) + ": " + e.what());
  }
}

}  // namespace rl::model
