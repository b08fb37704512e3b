// One tool process of rl-env: a CoProcess (rl/core/coprocess.h) that speaks the tool protocol
// (man rl-env, TOOL PROTOCOL), under the limits of rl-env serve, and the translation of every
// way a call can fail into a result with a kind (protocol.h):
//
//   timeout      no reply line within limits.timeout_ms
//   crashed      the process exited or was killed by a signal during the call (which is said)
//   malformed    a reply that is not {"output": str} or {"error": str}, or more than one line
//   too-large    a reply (or a flood without newline) over limits.max_output_bytes
//   tool-error   the tool's own {"error": ...}
//   bad-arguments  the call's arguments are not JSON text; the tool is not asked
// After any failure but tool-error and bad-arguments the process has been killed; the next call
// starts it again.
// Thread safety: one thread at a time (a worker owns its processes).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "rl/core/coprocess.h"
#include "rl/env/protocol.h"

namespace rl::env {

struct ToolLimits {
  int64_t timeout_ms = 10000;
  int64_t memory_mb = 1024;  // 0: none
  int64_t cpu_s = 600;       // 0: none
  size_t max_output_bytes = 1 << 20;
  NetworkIsolation network = NetworkIsolation::kTry;
};

// The request line of a call: {"name": NAME, "arguments": VALUE}; empty arguments stand for
// null. DataError when the arguments are not JSON.
Result<std::string> RequestLine(const ToolCall& call);
// A reply line as a result: ok, tool-error or malformed (quoting the first 200 bytes).
ToolResult ParseReplyLine(const std::string& tool, const std::string& line);

class ToolProcess {
 public:
  // `cancel`: see CoProcessOptions::cancel (rl-env stopping).
  ToolProcess(std::string name, std::string command, const ToolLimits& limits,
              const std::atomic<bool>* cancel = nullptr);
  ToolResult Run(const ToolCall& call);
  const CoProcess& process() const { return process_; }

 private:
  std::string name_;
  ToolLimits limits_;
  CoProcess process_;
};

}  // namespace rl::env
