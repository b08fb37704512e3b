// Multi-turn conversations with tools: the model generates until it closes a tool call or ends
// its answer; each call runs in rl-env (through a ToolRunner), its result is appended as tokens
// the trainer does not learn from (loss mask 0), and generation goes on, up to max_turns and a
// token budget.
//
// A turn is one generation segment and what follows it: the segment ends with the call's closing
// tag (format.call_close, a single token: Qwen's </tool_call>, the demo's </call>), with eos, or
// with the budget. The call is the text between the last opening tag and the closing one: a JSON
// object {"name": ..., "arguments": ...} (the Hermes/Qwen form) names its tool; any other text
// goes whole, as a JSON string, to format.default_tool. The result is
// result_open + output + result_close (or "error: " + the error), encoded by the model's
// tokenizer and cut to max_result_tokens (characters the vocabulary has no token for are left
// out: the demo's vocabulary is digits and a few signs).
//
// Progress lives in the Conversation (token ids, log-probs, loss mask, weight version of every
// token after the prompt, turn and call counts), so a conversation can be written out after any
// turn (ProgressColumns) and continued elsewhere from there (FromProgress): a rollout that dies
// loses the turn it was generating, not the turns before it.
// Thread safety: runs on the calling thread; the tokenizer is only read.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "rl/core/status.h"
#include "rl/env/client.h"
#include "rl/model/generate.h"
#include "rl/model/model_dir.h"
#include "rl/wire/value.h"

namespace rl::rollout {

struct ToolFormat {
  std::string call_open = "<call>", call_close = "</call>";        // tokens of the model's vocabulary
  std::string result_open = "<result>", result_close = "</result>";  // text around a tool's output
  std::string default_tool = "calc";  // the tool a call that is not a JSON object goes to
  int64_t max_result_tokens = 64;     // a longer result is cut (the cut is said in the text)
};

struct ConversationOptions {
  ToolFormat format;
  int64_t max_turns = 4;    // generation segments; a conversation still calling after them ends
  int64_t max_tokens = 0;   // after the prompt, tool tokens included; 0: up to the context
  double tool_error_reward = 0;  // the reward of a turn whose call failed (a penalty when < 0)
  model::GenerateOptions generate;  // eos_id from the model dir; stop_ids set here
};

// The format's tag ids in `dir`'s vocabulary; Config when call_close or call_open is not a
// single token (a tool call could not be told from text).
struct ToolTokens {
  int64_t call_open = -1, call_close = -1;
};
Result<ToolTokens> ResolveToolTokens(const model::ModelDir& dir, const ToolFormat& format);

struct Conversation {
  std::vector<int64_t> prompt;
  std::vector<int64_t> ids;       // every token after the prompt: the model's and the tools'
  std::vector<float> logprobs;    // the sampling log-prob of each model token; 0 for tool tokens
  std::vector<int64_t> mask;      // 1: a model token (trained on); 0: a tool token
  std::vector<int64_t> versions;  // the weight version of each model token; -1 for tool tokens
  // Per completed turn: where its model segment ends in ids (one past its last model token; -1
  // when unknown: progress written before these were kept) and its reward (the tool's reward for
  // the call it made, ConversationOptions::tool_error_reward for a call that failed, 0 for an
  // answer: the answer's reward is the verifier's, rl-reward's column `reward`).
  std::vector<int64_t> turn_ends;
  std::vector<float> turn_rewards;
  int64_t turns = 0, tool_calls = 0, tool_errors = 0;
  int64_t answer_from = 0;  // ids[answer_from..] is the last segment: the final answer
  bool done = false;
  // With GenerateOptions::record_routes: the last segment's Generation::routes. Each segment
  // prefills the whole conversation so far, so they cover every token fed before it. Not kept in
  // the progress columns: a resumed conversation records them again at its next segment.
  std::vector<int32_t> routes;

  // The oldest weight version among the model's tokens (-1 when it has none).
  int64_t OldestVersion() const;
};

// The progress columns of a conversation row (rl-protocol(7), "Conversation rows"): conv_ids,
// conv_logprobs, conv_mask, conv_versions, conv_turns, conv_tool_calls, conv_tool_errors,
// conv_answer_from. Names no task needs, so writing them makes no row ready for anyone.
std::vector<std::pair<std::string, Value>> ProgressColumns(const Conversation& c);
extern const std::vector<std::string> kProgressColumns;
// A conversation continued from its progress columns (none: from the start). DataError when they
// are there but inconsistent (lengths differ, a mask value other than 0/1) or hold a token outside
// [0, vocab_size): progress written by a model of another vocabulary, which the model would
// index out of its embedding with.
Result<Conversation> FromProgress(std::vector<int64_t> prompt,
                                  const std::vector<std::pair<std::string, Value>>& columns, int64_t vocab_size);

using ToolRunner = std::function<Result<std::vector<env::ToolResult>>(const std::vector<env::ToolCall>&)>;

struct TurnStats {
  int64_t segments = 0, new_tokens = 0, tool_calls = 0, tool_errors = 0, tool_tokens = 0;
  double generate_s = 0, tools_s = 0;
  model::GenerateStats switching;  // its switches, interrupted, reprefill_tokens and switch_s summed
};

// What generates a turn's segments: model::Generate by default; a rollout group's leader
// (dist::GroupLeader::Generate, which sends the model's weights along when `version` is new to
// its followers) makes the conversations run on the whole group.
using SegmentGenerator = std::function<Result<std::vector<model::Generation>>(
    const model::Transformer& model, uint64_t version, const std::vector<std::vector<int64_t>>& prompts,
    const model::GenerateOptions& options, model::GenerateStats* stats)>;

class ConversationRunner {
 public:
  // REQUIRES: dir outlives the runner. `generate` empty: model::Generate.
  ConversationRunner(const model::ModelDir& dir, ConversationOptions options, ToolTokens tokens,
                     SegmentGenerator generate = {})
      : dir_(dir), o_(std::move(options)), tokens_(tokens), generate_(std::move(generate)) {}

  // One turn of every conversation not done: generate its next segment with `model` (tokens
  // stamped `version`, or the version Generate switched to with options.generate.newer_weights),
  // run the calls that segments closed (all of them in one ToolRunner call) and append their
  // results. A conversation is done when its segment ended without a call, at
  // max_turns, or with no room left. `seed` seeds this turn's sampling. An error from the model
  // or from `tools` (rl-env unreachable) leaves the conversations as they were before the turn.
  Status Turn(const model::Transformer& model, uint64_t version, const std::vector<Conversation*>& active,
              const ToolRunner& tools, uint64_t seed, TurnStats* stats);

  // Turns until every conversation is done.
  Status Finish(const model::Transformer& model, uint64_t version, const std::vector<Conversation*>& all,
                const ToolRunner& tools, uint64_t seed, TurnStats* stats);

  // The call a segment closed: the text between the last call_open and the closing tag.
  env::ToolCall ParseCall(const std::string& body) const;
  // The tokens of a tool's result as appended to the conversation.
  Result<std::vector<int64_t>> ResultTokens(const env::ToolResult& r) const;
  // The final answer's text (the last segment, special tokens left out) and the whole transcript.
  Result<std::string> Answer(const Conversation& c) const;
  Result<std::string> Transcript(const Conversation& c) const;

  int64_t Budget(const Conversation& c) const;  // tokens it may still add

 private:
  const model::ModelDir& dir_;
  ConversationOptions o_;
  ToolTokens tokens_;
  SegmentGenerator generate_;
};

}  // namespace rl::rollout
