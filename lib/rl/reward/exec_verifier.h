// ExecVerifier: rewards from an external command speaking JSON lines (rl-reward --exec).
//
// For each row it sends {"prompt": ..., "response": ..., "answer": ...} on one line and wants
// one line back: {"reward": <number>} (other keys are ignored). Failures are errors, never a
// silent zero:
//   - the command exited: it is restarted and the request sent once more; if it dies again the
//     row fails with Unavailable;
//   - no reply within the timeout: the command is killed (restarted on the next row) and the row
//     fails with Timeout;
//   - a reply that is not a JSON object with a numeric "reward": the row fails with DataError,
//     quoting the reply, and the command is restarted (the exchange may be out of step).
// After kMaxConsecutiveFailures failed rows in a row, Score returns Unavailable with
// "giving up" in the message, and keeps doing so until a row succeeds: callers treat that as the
// command being broken rather than the row.
// Thread safety: one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "rl/core/coprocess.h"
#include "rl/reward/verifier.h"

namespace rl::reward {

class ExecVerifier final : public Verifier {
 public:
  static constexpr int kMaxConsecutiveFailures = 10;

  ExecVerifier(std::string command, int timeout_ms) : process_(std::move(command)), timeout_ms_(timeout_ms) {}
  Result<double> Score(const RewardRequest& req) override;

  // True once the command failed kMaxConsecutiveFailures rows in a row.
  bool broken() const override { return failures_ >= kMaxConsecutiveFailures; }
  const CoProcess& process() const { return process_; }

 private:
  Result<double> Exchange(const std::string& request);

  CoProcess process_;
  int timeout_ms_;
  int failures_ = 0;
};

}  // namespace rl::reward
