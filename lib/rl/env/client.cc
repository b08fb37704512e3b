#include "rl/env/client.h"

#include <algorithm>

namespace rl::env {
namespace {

ClientOptions WithSender(ClientOptions o) {
  if (o.sender.empty()) o.sender = NewSenderId("rl-env-client");
  return o;
}

}  // namespace

EnvClient::EnvClient(ClientOptions options, int64_t call_timeout_ms)
    : client_(WithSender(std::move(options))), call_timeout_ms_(std::max<int64_t>(call_timeout_ms, 0)) {}

Result<std::vector<ToolResult>> EnvClient::Call(const std::vector<ToolCall>& calls) {
  if (calls.empty()) return std::vector<ToolResult>();
  // rl-env takes at most kMaxCallsPerRequest calls and --max-message bytes a request (64 MiB by
  // default): a rollout's turn may make more (--count goes to 100000), so they go in parts.
  std::vector<ToolResult> out;
  double seconds = 0;
  for (size_t from = 0; from < calls.size();) {
    size_t to = from, bytes = 0;
    while (to < calls.size() && to - from < kMaxCallsPerRequest) {
      const size_t call_bytes = calls[to].name.size() + calls[to].arguments.size() + 16;
      if (to > from && bytes + call_bytes > kRequestBytes) break;
      bytes += call_bytes;
      ++to;
    }
    RL_ASSIGN_OR_RETURN(std::vector<ToolResult> part,
                        CallOnce(std::vector<ToolCall>(calls.begin() + static_cast<std::ptrdiff_t>(from),
                                                       calls.begin() + static_cast<std::ptrdiff_t>(to))));
    for (ToolResult& r : part) out.push_back(std::move(r));
    seconds += last_seconds_;
    from = to;
  }
  last_seconds_ = seconds;
  return out;
}

Result<std::vector<ToolResult>> EnvClient::CallOnce(const std::vector<ToolCall>& calls) {
  // The calls may queue behind each other (and behind other clients' calls) on rl-env's workers,
  // so an attempt waits as if they ran one after another. A wait that runs out is harmless: the
  // retry joins the run in progress instead of starting another.
  int64_t wait_ms = call_timeout_ms_ * static_cast<int64_t>(std::min<size_t>(calls.size(), 64)) + 1000;
  if (!reached_) RL_RETURN_IF_ERROR(client_.Call(Op::kPing, EmptyBody()).status());
  reached_ = true;
  Result<Message> reply = client_.Call(kOpToolCall, EncodeCallRequest(calls), {}, wait_ms);
  reached_ = reply.ok();
  if (!reply.ok()) return reply.status();
  RL_ASSIGN_OR_RETURN(CallReply r, DecodeCallReply(reply->body));
  if (r.results.size() != calls.size()) {
    return Status::Protocol("rl-env answered " + std::to_string(r.results.size()) + " results to " +
                            std::to_string(calls.size()) + " calls");
  }
  last_seconds_ = r.seconds;
  return std::move(r.results);
}

}  // namespace rl::env
