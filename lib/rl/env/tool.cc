#include "rl/env/tool.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "rl/core/json_field.h"
#include "rl/core/log.h"
#include "rl/core/reward_limit.h"
#include "rl/wire/json_value.h"

namespace rl::env {
namespace {

std::string Quote(const std::string& s) { return "'" + (s.size() > 200 ? s.substr(0, 200) + "..." : s) + "'"; }

// CoProcess says "tool: 'calc' gave no reply ..."; a result reads "tool 'calc' gave no reply ...".
std::string Tidy(const std::string& message) {
  return message.rfind("tool: '", 0) == 0 ? "tool " + message.substr(6) : message;
}

CoProcessOptions OptionsFor(const std::string& name, const ToolLimits& l, const std::atomic<bool>* cancel) {
  CoProcessOptions o;
  o.label = "tool";
  o.name = "'" + name + "'";
  o.memory_bytes = l.memory_mb * 1024 * 1024;
  o.cpu_seconds = l.cpu_s;
  o.max_output_bytes = l.max_output_bytes;
  o.one_line = true;
  o.network = l.network;
  o.log_stderr = true;
  o.cancel = cancel;
  return o;
}

}  // namespace

Result<std::string> RequestLine(const ToolCall& call) {
  nlohmann::ordered_json args = nullptr;  // ordered: keys go to the tool as the model wrote them
  if (call.arguments.find_first_not_of(" \t\r\n") != std::string::npos) {
    if (!JsonDepthWithin(call.arguments, kMaxJsonDepth)) {
      return Status::DataError("the arguments nest deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    }
    args = nlohmann::ordered_json::parse(call.arguments, nullptr, false);
    if (args.is_discarded()) return Status::DataError("the arguments are not JSON: " + Quote(call.arguments));
  }
  nlohmann::ordered_json req = {{"name", call.name}, {"arguments", std::move(args)}};
  // dump escapes newlines inside strings, so the request stays one line.
  return JsonText(req);
}

ToolResult ParseReplyLine(const std::string& tool, const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (!j.is_discarded() && j.is_object()) {
    auto error = j.find("error");
    if (error != j.end() && error->is_string()) return Failed(kKindToolError, error->get<std::string>());
    auto output = j.find("output");
    auto reward = j.find("reward");
    const bool reward_ok = reward == j.end() || (reward->is_number() && RewardInRange(reward->get<double>()));
    if (output != j.end() && output->is_string() && reward_ok) {
      ToolResult r;
      r.ok = true;
      r.output = output->get<std::string>();
      if (reward != j.end()) r.reward = reward->get<double>();
      return r;
    }
  }
  return Failed(kKindMalformed, "tool '" + tool + "' replied " + Quote(line) +
                                    ", not {\"output\": string[, \"reward\": number up to 1e6 in size]} or {\"error\": string}; it was killed and will be "
                                    "restarted");
}

ToolProcess::ToolProcess(std::string name, std::string command, const ToolLimits& limits,
                         const std::atomic<bool>* cancel)
    : name_(std::move(name)), limits_(limits), process_(std::move(command), OptionsFor(name_, limits, cancel)) {}

ToolResult ToolProcess::Run(const ToolCall& call) {
  Result<std::string> line = RequestLine(call);
  if (!line.ok()) return Failed(kKindBadArguments, line.status().message());
  // RLIMIT_CPU counts the process's whole life: one that has too little left for a full call is
  // started afresh, so the limit ends only processes that spin outside calls or in children.
  if (limits_.cpu_s > 0 && process_.running()) {
    int64_t used = process_.MaxCpuMillis();
    if (used >= 0 && used + limits_.timeout_ms >= limits_.cpu_s * 1000) {
      spdlog::info("tool '{}': pid {} used {:.1f} s of its {} s of CPU; starting it afresh", name_, process_.pid(),
                   used / 1000.0, limits_.cpu_s);
      process_.Kill();
    }
  }
  Result<std::string> reply = process_.Call(*line, limits_.timeout_ms);
  if (reply.ok()) {
    ToolResult r = ParseReplyLine(name_, *reply);
    if (!r.ok && r.kind == kKindMalformed) process_.Kill();  // the next call starts in step
    return r;
  }
  const Status& s = reply.status();
  switch (s.code()) {
    case Code::kTimeout: return Failed(kKindTimeout, Tidy(s.message()));
    case Code::kTooLarge: return Failed(kKindTooLarge, Tidy(s.message()));
    case Code::kDataError: return Failed(kKindMalformed, Tidy(s.message()));
    default: break;
  }
  std::string hint;
  const std::string& how = process_.last_exit();
  if (how.find("SIGXCPU") != std::string::npos) {
    hint = " (its CPU limit of " + std::to_string(limits_.cpu_s) + " s was reached)";
  } else if (limits_.memory_mb > 0 && (how.find("SIGKILL") != std::string::npos ||
                                       how.find("SIGSEGV") != std::string::npos ||
                                       how.find("SIGABRT") != std::string::npos)) {
    hint = " (a process past its memory limit of " + std::to_string(limits_.memory_mb) + " MiB may end this way)";
  }
  return Failed(kKindCrashed, Tidy(s.message()) + " during the call" + hint);
}

}  // namespace rl::env
