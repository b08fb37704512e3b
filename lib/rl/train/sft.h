// Supervised warm start: next-token cross-entropy on the response tokens (the response and
// <eos>, never the prompt) of prompt/response examples, AdamW, until held-out greedy accuracy
// first reaches a target (the policy is then good enough for RL to find rewards, and not yet
// done) or a step limit.
// Examples come from a JSON-lines dataset (rl/task/dataset.h) of prompt and response, or of chat
// messages ending in the assistant's reply, encoded by model::PromptEncoder as the feeder encodes
// GRPO prompts (so SFT trains exactly the continuation that generation produces). Examples longer
// than the model's context are left out and counted.
// Thread safety: none; trains *model in place.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/prompt_encoder.h"
#include "rl/model/transformer.h"
#include "rl/reward/verifier.h"
#include "rl/task/dataset.h"
#include "rl/train/adamw.h"
#include "rl/train/evaluate.h"
#include "rl/train/lr_schedule.h"
#include "rl/train/sample.h"

namespace rl::train {

struct SftOptions {
  LrSchedule schedule{1e-3};  // constant unless set; a decay's horizon is max_steps
  int64_t batch_size = 256;
  int64_t max_steps = 5000;
  double target_accuracy = 0.3;
  int64_t eval_every = 25;
  int64_t eval_max_new_tokens = 0;  // 0: up to the context
  double grad_clip = 1.0;
  uint64_t seed = 0;
  AdamWOptions adamw;
  // The model computes in bfloat16 with float32 masters in AdamW (adamw.h); at the end it is back
  // in its own dtype with the masters' values.
  bool bf16 = false;
};

// What held-out evaluation needs; RunSft evaluates nothing when it is null.
struct SftEval {
  const model::PromptEncoder* encoder;
  const EvalSet* set;
  reward::Verifier* verifier;
};

struct SftProgress {
  int64_t step = 0;
  double loss = 0, accuracy = 0, seconds = 0, lr = 0;
  bool evaluated = false;
};

struct SftResult {
  int64_t steps = 0;
  double accuracy = 0, seconds = 0;
  bool evaluated = false;  // accuracy was measured at least once
  bool reached = false;    // the target accuracy was reached (else the step limit or a stop)
};

struct SftData {
  std::vector<Sample> samples;  // prompt_ids and response_ids (eos last)
  uint64_t too_long = 0;        // examples left out: longer than the context
};

// Every example of `data` (which must have responses) encoded. With `tool_result` (the token ids
// of the text that opens a tool's result and of the text that closes it), each such span of a
// response, tags included, gets loss mask 0, as rl-rollout masks what tools wrote in RL: the
// model learns to call and to use results, not to guess them.
struct ToolResultTags {
  std::vector<int64_t> open, close;
};
// How SFT records are read: as prompts are (`prompts`: keys, system prompt), with a response
// under `response_key`, or, for chat messages and no response key given, the last assistant message.
task::DatasetOptions SftRecordOptions(task::DatasetOptions prompts, const std::string& response_key,
                                      bool response_key_given);
Result<SftData> EncodeSftData(task::Dataset* data, const model::PromptEncoder& encoder, int64_t context,
                              const ToolResultTags* tool_result = nullptr);
// The loss mask of `ids` with every span from tags.open through tags.close at 0 (an open span
// runs to the end).
std::vector<int64_t> ToolResultMask(const std::vector<int64_t>& ids, const ToolResultTags& tags);

// Evaluates every eval_every steps, and once an evaluation reached half the target, at the first
// step after the training since the last evaluation took as long as that evaluation.
// Calls on_step after every step (evaluated: accuracy was measured at this step).
Result<SftResult> RunSft(model::Transformer* model, const SftData& data, int64_t pad_id, const SftEval* eval,
                         const SftOptions& options, const std::function<void(const SftProgress&)>& on_step,
                         const std::atomic<bool>& stop);

}  // namespace rl::train
