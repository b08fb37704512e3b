// Generate: sampled continuations of a set of prompts, with the per-token log-probabilities the
// trainer needs, using continuous batching over a fixed number of slots.
//
// Scheduling: up to `slots` sequences decode together, one token per step. When a sequence
// stops — it sampled eos_id, reached max_new_tokens, or filled the model's context — its slot is
// refilled at once with the next pending prompt (prefilled in the same round, prompts of equal
// length together), while the other slots go on decoding. Sequences are started in prompt order
// and each step samples the active slots in slot order, so a fixed seed, options and prompts give
// the same result.
//
// Two decoding paths with the same schedule: with use_kv_cache (the default) each step feeds
// only the new tokens through Transformer::ForwardStep; without it each step runs a full forward
// pass over every active sequence (right-padded). The second exists as a baseline for benchmarks
// and tests; both give the same logits up to float rounding.
//
// Interruptible generation (partial rollouts): with options.newer_weights set, Generate asks it
// before every decode step whether newer weights are ready. When they are, it switches to them at
// once: every live sequence (prompt + the tokens sampled so far) is prefilled again under the new
// weights (the KV cache is recomputed, not kept), its next token is sampled from the new logits,
// and decoding goes on. Tokens keep the log-probability they were sampled with, and
// Generation::versions records the weight version of each token (options.version until the first
// switch). Without newer_weights a call runs under one version from start to end.
// Thread safety: Generate uses `model` read-only; do not change its weights during the call
// except through newer_weights (the model it returns replaces `model` for the rest of the call).
// This header does not include libtorch.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/sampler.h"
#include "rl/model/transformer.h"

namespace rl::model {

struct Generation;

// Weights Generate continues with (see the file comment).
struct WeightSwitch {
  const Transformer* model = nullptr;  // must live until the call ends or switches again
  int64_t version = 0;
};
// Asked before each decode step: the newer weights when some are ready, nullopt otherwise. It may
// replace the storage of the model Generate is using (Generate touches the old one no more once it
// returns a switch). An error ends the call with that error.
using NewerWeights = std::function<Result<std::optional<WeightSwitch>>()>;
// Asked for more prompts when `free` slots are free and none is pending (see the file comment);
// it may return more than `free` (they wait for slots) or none. An error ends the call with it.
using MorePrompts = std::function<Result<std::vector<std::vector<int64_t>>>(int64_t free)>;
// Told of each sequence as it stops: its index and its finished generation. An error ends the
// call with it.
using OnFinished = std::function<Status(size_t index, const Generation& generation)>;

struct GenerateOptions {
  int64_t max_new_tokens = 16;
  SamplingOptions sampling;
  uint64_t seed = 0;
  int64_t slots = 8;    // sequences decoded at once
  int64_t eos_id = -1;  // the token that ends a response (kept in it); -1: none
  // More tokens that end a response, kept in it (a tool call's closing tag): StopReason kStop.
  std::vector<int64_t> stop_ids;
  // Per prompt, when not empty (one per prompt): its own cap on new tokens instead of
  // max_new_tokens (a multi-turn conversation's remaining budget). Each must be >= 1.
  std::vector<int64_t> max_new_tokens_each;
  bool use_kv_cache = true;
  int64_t version = 0;         // the version of `model`, stamped on each token (Generation::versions)
  NewerWeights newer_weights;  // empty: the weights never change during the call
  MorePrompts more_prompts;    // empty: the call ends when its prompts are done (not with max_new_tokens_each)
  OnFinished on_finished;      // may be empty
  // Routing replay (transformer.h, Routes): keep, in Generation::routes, the experts every token
  // fed through a mixture-of-experts model used in each sparse layer. Nothing for a dense model.
  bool record_routes = false;
};

enum class StopReason { kEos, kMaxTokens, kContext, kStop };

struct Generation {
  std::vector<int64_t> response_ids;  // the sampled tokens, eos included when it was sampled
  std::vector<float> logprobs;        // log_softmax(logits)[token] for each response token
  std::vector<int64_t> versions;      // the weight version whose logits each token was sampled from
  StopReason stop = StopReason::kMaxTokens;
  // With GenerateOptions::record_routes: [P + R - 1, S, k] row-major, the experts of each token
  // the model was fed (the prompt's P and the response's R but its last, which nothing read) in
  // each of the S sparse layers (ModelConfig::SparseLayerCount), k per token. After a weight
  // switch, those of the prefill under the newer weights (the routes the KV cache holds).
  std::vector<int32_t> routes;
};

// Appends the experts of one row's fed tokens, [T, S, k] integers on the CPU (a decoder's or a
// forward step's Routes::record), to g->routes.
void AppendRoutes(const at::Tensor& used, Generation* g);

struct GenerateStats {
  int64_t steps = 0;          // sampling rounds
  int64_t forward_calls = 0;  // model invocations (prefills included)
  int64_t new_tokens = 0;     // response tokens over all sequences
  int64_t switches = 0;       // weight switches during the call (newer_weights)
  int64_t interrupted = 0;    // live sequences that were continued under newer weights
  int64_t reprefill_tokens = 0;  // tokens prefilled again under newer weights
  double switch_s = 0;        // time spent prefilling again (the cost of switching)
};

// InvalidArgument when Generate would refuse these prompts and options (see Generate).
Status CheckGenerateRequest(const ModelConfig& config, const std::vector<std::vector<int64_t>>& prompts,
                            const GenerateOptions& options);

// Whether a response stops after sampling `id`, its `generated`-th token, leaving the sequence
// `length` tokens long (prompt included) in a context of `context`; `cap` is its token budget
// (max_new_tokens or its max_new_tokens_each entry). Sets g->stop when it does. The rule Generate
// applies, shared with other decoding loops (lib/rl/dist's adaptive engine).
bool StopsAfter(const GenerateOptions& options, int64_t cap, int64_t id, int64_t generated,
                int64_t length, int64_t context, Generation* g);

// One Generation per prompt, in prompt order (with more_prompts, those it added after the
// caller's). InvalidArgument when a prompt is empty, holds an
// id outside the vocabulary, or leaves no room in the context; or when options are invalid; or
// when newer weights have another vocabulary size or context.
// *stats may be null.
Result<std::vector<Generation>> Generate(const Transformer& model,
                                         const std::vector<std::vector<int64_t>>& prompts,
                                         const GenerateOptions& options,
                                         GenerateStats* stats = nullptr);

}  // namespace rl::model
