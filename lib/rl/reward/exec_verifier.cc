#include "rl/reward/exec_verifier.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include "rl/core/json_field.h"
#include "rl/core/log.h"
#include "rl/core/reward_limit.h"

namespace rl::reward {
namespace {

std::string Quote(const std::string& reply) {
  return "'" + (reply.size() > 200 ? reply.substr(0, 200) + "..." : reply) + "'";
}

Result<double> ParseReply(const std::string& reply) {
  nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded()) return Status::DataError("exec: malformed reply (not JSON): " + Quote(reply));
  if (!j.is_object() || !j.contains("reward") || !j["reward"].is_number()) {
    return Status::DataError("exec: malformed reply (wants {\"reward\": number}): " + Quote(reply));
  }
  double r = j["reward"].get<double>();
  if (!RewardInRange(r)) return Status::DataError("exec: reward is not finite or above 1e6 in size: " + Quote(reply));
  return r;
}

}  // namespace

Result<double> ExecVerifier::Exchange(const std::string& request) {
  Result<std::string> reply = process_.Call(request, timeout_ms_);
  if (!reply.ok() && reply.status().code() == Code::kUnavailable && process_.starts() > 0) {
    spdlog::warn("{}; restarting it", reply.status().message());
    reply = process_.Call(request, timeout_ms_);
  }
  if (!reply.ok()) return reply.status();
  Result<double> r = ParseReply(*reply);
  if (!r.ok()) process_.Kill();  // the next row starts from a fresh, in-step process
  return r;
}

Result<double> ExecVerifier::Score(const RewardRequest& req) {
  nlohmann::json j = {{"prompt", req.prompt}, {"response", req.response}, {"answer", req.answer}};
  Result<double> r = Exchange(JsonText(j));
  if (r.ok()) {
    failures_ = 0;
    return r;
  }
  ++failures_;
  if (broken()) {
    return Status::Unavailable("exec: giving up after " + std::to_string(failures_) + " failed rows in a row; last: " +
                               r.status().message());
  }
  return r;
}

}  // namespace rl::reward
