// GenerateJsonl: `rl-rollout generate`, generation without a queue, for evaluation and scripts.
//
// Input: JSON lines, each a dataset record (rl/task/dataset.h: a prompt string, or chat messages
// with --messages-key), encoded by model::PromptEncoder (the model's tokenizer, the chat
// template or none). Output: one JSON line per input line, in order: the
// input object's fields, then "response" (decoded, no special tokens), "response_ids"
// (eos included when sampled) and "logprobs" (the policy's log-probability of each response
// token at temperature 1). Other input fields (an "answer", say) pass through, so the output can
// go straight to `rl-reward score`.
// With tools (a ToolRunner and conversation options), each prompt is a multi-turn conversation
// (conversation.h): "response" is the final answer's text, and "transcript", "loss_mask",
// "turns", "tool_calls" and "tool_errors" are added.
// Prompts are generated `chunk` at a time with continuous batching; chunk k is sampled with
// seed options.seed + k, so a run is reproducible. A bad line stops the run with DataError after
// the lines before it have been written.
// Thread safety: runs on the calling thread.
#pragma once

#include <cstdint>
#include <istream>
#include <ostream>

#include "rl/model/generate.h"
#include "rl/model/prompt_encoder.h"
#include "rl/rollout/conversation.h"

namespace rl::rollout {

struct GenerateJsonlOptions {
  const model::PromptEncoder* encoder = nullptr;  // required
  task::DatasetOptions records;     // keys of the input records (answers are not read)
  model::GenerateOptions generate;  // eos_id set from the model dir; max_new_tokens 0: context
  size_t chunk = 512;
  const ConversationOptions* conversation = nullptr;  // with tools: both set
  ToolRunner tools;
};

struct GenerateJsonlStats {
  uint64_t lines = 0, tokens = 0, tool_calls = 0, tool_errors = 0;
  double generate_s = 0;
};

Status GenerateJsonl(const model::Transformer& model, const GenerateJsonlOptions& options, std::istream& in,
                     std::ostream& out, GenerateJsonlStats* stats = nullptr);

}  // namespace rl::rollout
