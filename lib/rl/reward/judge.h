// Judge: a generative reward model (rl-reward --judge DIR). A language model in a Hugging Face
// directory (its own weights, apart from the policy's) reads a judging prompt made from each row
// (judge_prompt.h) and gives a verdict, in one of two modes:
//
//   prob      one forward pass per batch: p = P(verdict token | judging prompt), the next-token
//             probability at temperature 1. The reward is 1 when p >= threshold, else 0; with
//             threshold 0 it is p itself. The default threshold is 0.5: a 0/1 reward means what a
//             rule verifier's means, so dynamic sampling's uniform-group filter and a mean reward
//             read as accuracy keep working; a graded p is there for those who want it.
//   generate  a short greedy generation (max_new_tokens, stopping at eos); the first match of a
//             PCRE2 pattern in the generated text is the verdict; reward 1 when it equals the
//             verdict text (both trimmed of white space), else 0. No match is a 0 (counted in
//             unparsed()): the judge said nothing usable, which is not the row's fault.
//
// The judging prompt is encoded as rl-train sft encodes a prompt (model::PromptEncoder with the
// directory's chat template when it has one), so a judge trained with rl-train sft on
// {"prompt": <rendered template>, "response": <verdict>} sees at judging time exactly the ids it
// was trained on.
// Batching: ScoreBatch runs all rows in one padded forward pass (prob; the LM head only at each
// row's last position) or one continuous-batching generation with a slot per row (generate).
// Errors: Open returns NotFound for a missing directory or file, Config for a directory without
// weights or a verdict that is not exactly one token (prob mode), InvalidArgument for a bad
// template, pattern or option, and the loaders' errors otherwise. A row whose judging prompt does
// not fit the judge's context fails alone (DataError).
// Thread safety: one thread at a time (as every Verifier); the torch thread count is the
// caller's (at::set_num_threads).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/reward/verifier.h"

namespace rl::reward {

inline constexpr const char* kDefaultJudgeTemplate =
    "Question: {prompt}\nResponse: {response}\nIs the response correct? Answer yes or no.\nAnswer:";

struct JudgeOptions {
  std::string dir;                 // the judge's model directory (weights required)
  std::string mode = "prob";       // prob or generate
  std::string prompt_template = kDefaultJudgeTemplate;
  std::string verdict = " yes";    // the token (prob) or text (generate) that means "correct"
  double threshold = 0.5;          // prob: reward = p >= threshold; 0: reward = p
  std::string pattern = "yes|no";  // generate: PCRE2 pattern whose first match is the verdict
  int64_t max_new_tokens = 8;      // generate: length of the verdict generation
  std::string device = "cpu";      // where the judge computes (model/device.h)
};

class JudgeVerifier : public Verifier {
 public:
  // Opens and loads the judge (see the header for errors).
  static Result<std::unique_ptr<JudgeVerifier>> Open(const JudgeOptions& options);

  // Rows scored by generate mode whose generated text had no match of the pattern.
  virtual uint64_t unparsed() const = 0;
  // prob mode: the probability of the verdict for each request (no threshold), in one pass.
  virtual Result<std::vector<Result<double>>> Probabilities(const std::vector<RewardRequest>& reqs) = 0;
};

}  // namespace rl::reward
