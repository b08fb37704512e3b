// Evaluation on held-out examples of any dataset, scored by any verifier: greedy pass@1, and
// mean@k (the mean reward of k sampled responses per example, averaged over examples).
//
// An EvalSet is the first `limit` examples of a JSON-lines file (rl/task/dataset.h) with their
// prompt ids (rl/model/prompt_encoder.h), read once. Responses are decoded without special
// tokens and scored with the example's question (QuestionOf) and answer; a row the verifier
// cannot score counts as wrong and is logged (once per evaluation).
// Thread safety: uses the model read-only; do not change its weights during a call. A Verifier is
// used by one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/prompt_encoder.h"
#include "rl/model/transformer.h"
#include "rl/reward/verifier.h"
#include "rl/task/dataset.h"

namespace rl::train {

struct EvalSet {
  std::string path;
  std::vector<task::Example> examples;
  std::vector<std::vector<int64_t>> prompts;  // ids, one per example
};

// DataError names FILE:LINE for a record the encoder cannot take or that has no answer.
Result<EvalSet> LoadEvalSet(const std::string& path, const task::DatasetOptions& options,
                            const model::PromptEncoder& encoder, size_t limit);

struct EvalOptions {
  int64_t max_new_tokens = 0;  // 0: up to the model's context
  int64_t slots = 64;
  int64_t samples = 0;         // k of mean@k; 0: greedy only
  double temperature = 1.0;    // of the k samples
  uint64_t seed = 0;
};

struct EvalResult {
  double pass_at_1 = 0;  // greedy
  double mean_at_k = 0;  // over samples; 0 when samples is 0
  int64_t k = 0;
  size_t examples = 0;
  size_t unscorable = 0;  // rows the verifier refused (counted as wrong)
};

// DataError naming FILE:LINE when a prompt leaves no room in the model's context.
Result<EvalResult> Evaluate(const model::Transformer& model, const model::PromptEncoder& encoder,
                            const EvalSet& set, reward::Verifier* verifier, const EvalOptions& options);

// Greedy pass@1 alone (SFT and GRPO's held-out checks).
Result<double> GreedyAccuracy(const model::Transformer& model, const model::PromptEncoder& encoder,
                              const EvalSet& set, reward::Verifier* verifier, int64_t max_new_tokens);

}  // namespace rl::train
