// Verifiers: rule-based rewards for a response given the prompt and the reference answer.
//
//   addition  the demo task's: 1 when the response equals the answer exactly, else 0.
//   exact     1 when the response's final answer (FinalAnswer) equals the answer, both trimmed.
//   numeric   1 when the last number in the final answer is within `tolerance` of the answer
//             (absolute difference), else 0. An answer that is not a number is a DataError.
//   math      1 when the response's final answer (the last \boxed{}, else a "####" line, else
//             the last number) equals the answer once both are normalized: LaTeX, units, $ and
//             %, thousands separators; numbers and fractions compared as exact rationals. The
//             rules are in rl/task/math_answer.h. An empty answer is a DataError.
// A response that is wrong is a reward of 0, not an error; an error means the row itself cannot
// be scored (and is given back to the queue by the caller).
// Thread safety: a Verifier is used by one thread at a time (the exec verifier owns a process).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"

namespace rl::reward {

struct RewardRequest {
  std::string prompt, response, answer;
};

class Verifier {
 public:
  virtual ~Verifier() = default;
  virtual Result<double> Score(const RewardRequest& req) = 0;
  // One result per request, in order. The default calls Score on each; a verifier that gains
  // from batching (a judge model: one forward pass for all) overrides it.
  virtual std::vector<Result<double>> ScoreBatch(const std::vector<RewardRequest>& reqs);
  // True when the verifier cannot score anything any more (an external command that keeps
  // failing), as opposed to one row that cannot be scored.
  virtual bool broken() const { return false; }
};

// The text after the last "####" when the response has one, else its last non-empty line;
// surrounding white space removed.
std::string FinalAnswer(std::string_view response);
// The last number ("-12", "3.5", "1e-3", "1,234") in `text`, if any.
std::optional<double> LastNumber(std::string_view text);

std::unique_ptr<Verifier> MakeAdditionVerifier();
std::unique_ptr<Verifier> MakeExactVerifier();
std::unique_ptr<Verifier> MakeNumericVerifier(double tolerance);
std::unique_ptr<Verifier> MakeMathVerifier();
// By name ("addition", "exact", "numeric", "math"); InvalidArgument for another name.
Result<std::unique_ptr<Verifier>> MakeVerifier(const std::string& name, double tolerance);

}  // namespace rl::reward
