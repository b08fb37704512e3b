// JudgePrompt: the judging prompt of rl-reward --judge, a template over a row's fields.
//
// Template grammar: text with placeholders {prompt}, {response} and {answer}, replaced by the
// row's values as they are (no escaping); "{{" and "}}" stand for a literal brace. Any other
// "{...}", or a lone brace, is an error, so a typo ("{respnse}") is refused when the role starts
// rather than judged as text. {answer} makes a reference-guided judge; without it the judge sees
// only the question and the response.
// Thread safety: immutable after Parse; Render may run from any thread at once.
#pragma once

#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/reward/verifier.h"

namespace rl::reward {

class JudgePrompt {
 public:
  // InvalidArgument naming the bad placeholder or brace and its byte offset.
  static Result<JudgePrompt> Parse(const std::string& text);
  std::string Render(const RewardRequest& req) const;
  bool uses_answer() const;

 private:
  enum class Part { kText, kPrompt, kResponse, kAnswer };
  struct Piece {
    Part part;
    std::string text;  // kText only
  };
  std::vector<Piece> pieces_;
};

}  // namespace rl::reward
