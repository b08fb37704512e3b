// rl-env's wire protocol: tool calls in RLP1 envelopes (rl/wire/envelope.h, man/rl-protocol.7
// section "rl-env"). One op of its own, 96, far from the queue's (1-10), the heartbeats' (32, 33)
// and the weight sources' (64 and up); ping (1) is answered as every server answers it.
//
//   call (96)  request {calls: [{name: str, arguments: str}, ...]}   arguments: JSON text
//              reply   {results: [{output: str} | {error: str, kind: str}, ...], seconds: float64}
//              results in the order of the calls; seconds: the request's time on the server.
//   ping (1)   request {}   reply {time_ms: int, tools: [str], workers: uint}
//
// A failed call is a result with an error, never an error status: status codes are for requests
// that could not be read (Protocol, DataError, TooLarge).
// Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"
#include "rl/wire/envelope.h"

namespace rl::env {

constexpr Op kOpToolCall = static_cast<Op>(96);
constexpr size_t kMaxCallsPerRequest = 4096;

// Kinds of failed results (man rl-env, RESULTS).
constexpr char kKindTimeout[] = "timeout";
constexpr char kKindCrashed[] = "crashed";
constexpr char kKindMalformed[] = "malformed";
constexpr char kKindTooLarge[] = "too-large";
constexpr char kKindUnknownTool[] = "unknown-tool";
constexpr char kKindToolError[] = "tool-error";
constexpr char kKindBadArguments[] = "bad-arguments";

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text
};

struct ToolResult {
  bool ok = false;
  std::string output;  // ok
  std::string error;   // !ok
  std::string kind;    // !ok: one of the kinds above
  // A reward the tool gives for the call (its reply's "reward": an environment's intermediate
  // reward); the rollout makes it the reward of the turn that made the call. ok only.
  std::optional<double> reward;
};

ToolResult Failed(std::string kind, std::string error);

struct CallReply {
  std::vector<ToolResult> results;
  double seconds = 0;
};

std::string EncodeCallRequest(const std::vector<ToolCall>& calls);
// Protocol for a body that is not such a map, InvalidArgument for more than kMaxCallsPerRequest.
Result<std::vector<ToolCall>> DecodeCallRequest(std::string_view body);
std::string EncodeCallReply(const CallReply& reply);
Result<CallReply> DecodeCallReply(std::string_view body);

struct PingReply {
  int64_t time_ms = 0;
  std::vector<std::string> tools;
  uint64_t workers = 0;
};
std::string EncodePingReply(const PingReply& p);
Result<PingReply> DecodePingReply(std::string_view body);

}  // namespace rl::env
