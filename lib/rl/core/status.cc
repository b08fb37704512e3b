#include "rl/core/status.h"

namespace rl {

const char* CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "InvalidArgument";
    case Code::kDataError: return "DataError";
    case Code::kNotFound: return "NotFound";
    case Code::kConflict: return "Conflict";
    case Code::kUnavailable: return "Unavailable";
    case Code::kTimeout: return "Timeout";
    case Code::kProtocol: return "Protocol";
    case Code::kTooLarge: return "TooLarge";
    case Code::kCorruption: return "Corruption";
    case Code::kIOError: return "IOError";
    case Code::kConfig: return "Config";
    case Code::kInternal: return "Internal";
  }
  return "Unknown";
}

Status Status::FromWire(int code, std::string m) {
  if (code < 0 || code > static_cast<int>(Code::kInternal)) {
    return Protocol("unknown status code " + std::to_string(code) + ": " + m);
  }
  return Status(static_cast<Code>(code), std::move(m));
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Code::kOk: return kExitOk;
    case Code::kInvalidArgument: return kExitUsage;
    case Code::kDataError:
    case Code::kNotFound:
    case Code::kConflict:
    case Code::kTooLarge: return kExitDataErr;
    case Code::kUnavailable: return kExitUnavailable;
    case Code::kTimeout: return kExitTempFail;
    case Code::kProtocol: return kExitProtocol;
    case Code::kCorruption: return kExitDataErr;
    case Code::kIOError: return kExitIOErr;
    case Code::kConfig: return kExitConfig;
    case Code::kInternal: return kExitSoftware;
  }
  return kExitSoftware;
}

}  // namespace rl
