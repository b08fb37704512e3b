// Status and Result<T>: errors as values across lib/.
//
// A Status is OK or carries a Code and a one-line message. Each Code maps to one sysexits exit
// code (ExitCode) and to the numeric status carried on the wire (man/rl-protocol.7), so an error
// raised deep in lib/ reaches the user as the right exit code and the right reply status.
// Thread safety: values; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace rl {

// Wire status codes. The numbers are part of the protocol: never renumber.
enum class Code : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,  // the request or the command line is wrong (usage)
  kDataError = 2,        // input data is malformed (a JSON line, a column of the wrong type)
  kNotFound = 3,         // unknown task, index, key
  kConflict = 4,         // a column already set, a lease lost, a compare-and-set mismatch
  kUnavailable = 5,      // the peer cannot be reached
  kTimeout = 6,          // a deadline passed; retrying may succeed
  kProtocol = 7,         // a frame does not follow the protocol
  kTooLarge = 8,         // a message above the size limit
  kCorruption = 9,       // stored bytes fail their checksum or grammar
  kIOError = 10,         // the operating system refused a read or write
  kConfig = 11,          // a bad configuration file or value
  kInternal = 12,        // a bug
};

const char* CodeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string m) { return Status(Code::kInvalidArgument, std::move(m)); }
  static Status DataError(std::string m) { return Status(Code::kDataError, std::move(m)); }
  static Status NotFound(std::string m) { return Status(Code::kNotFound, std::move(m)); }
  static Status Conflict(std::string m) { return Status(Code::kConflict, std::move(m)); }
  static Status Unavailable(std::string m) { return Status(Code::kUnavailable, std::move(m)); }
  static Status Timeout(std::string m) { return Status(Code::kTimeout, std::move(m)); }
  static Status Protocol(std::string m) { return Status(Code::kProtocol, std::move(m)); }
  static Status TooLarge(std::string m) { return Status(Code::kTooLarge, std::move(m)); }
  static Status Corruption(std::string m) { return Status(Code::kCorruption, std::move(m)); }
  static Status IOError(std::string m) { return Status(Code::kIOError, std::move(m)); }
  static Status Config(std::string m) { return Status(Code::kConfig, std::move(m)); }
  static Status Internal(std::string m) { return Status(Code::kInternal, std::move(m)); }
  // From a wire status; unknown numbers become kProtocol.
  static Status FromWire(int code, std::string m);

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "NotFound: unknown task 'x'"; "OK" for success.
  std::string ToString() const;
  // The same error with "context: " in front of the message.
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// sysexits(3) codes the tools exit with.
enum ExitCode : int {
  kExitOk = 0,
  kExitUsage = 64,
  kExitDataErr = 65,
  kExitUnavailable = 69,
  kExitSoftware = 70,
  kExitIOErr = 74,
  kExitTempFail = 75,
  kExitProtocol = 76,
  kExitConfig = 78,
};

int ExitCodeFor(const Status& status);

// Result<T>: a T or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {
    if (status_.ok()) status_ = Status::Internal("Result built from an OK status without a value");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace rl

// Return early with the Status of an expression that is not OK.
#define RL_RETURN_IF_ERROR(expr)          \
  do {                                    \
    ::rl::Status rl_status_ = (expr);     \
    if (!rl_status_.ok()) return rl_status_; \
  } while (0)

#define RL_CONCAT_INNER(a, b) a##b
#define RL_CONCAT(a, b) RL_CONCAT_INNER(a, b)
// RL_ASSIGN_OR_RETURN(auto x, Foo()); declares x from a Result or returns its Status.
#define RL_ASSIGN_OR_RETURN(decl, expr) RL_ASSIGN_OR_RETURN_IMPL(RL_CONCAT(rl_result_, __LINE__), decl, expr)
#define RL_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  decl = std::move(tmp).value()
