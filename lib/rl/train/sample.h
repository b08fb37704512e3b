// Sample and Group: the rows of task `train` as the trainer sees them, decoded from a queue get.
//
// Columns read (the pipeline contract, man/rl-train.1): prompt_ids (i64 tensor, with <bos>),
// response_ids (i64 tensor), logprobs (f32 tensor, one per response token), reward (a finite
// number), version (an int, 0 or more), group (the prompt's group key); and loss_mask (integer tensor of 0/1, one per
// response token) when the row has one: a multi-turn conversation's tool tokens are 0, left out
// of every loss and count (no column: every response token is trained on); and token_versions
// (integer tensor, one per response token: the weight version each was sampled with, -1 for a
// tool's tokens) when the row has one: a conversation, or a rollout that switched weights
// mid-generation (rl-rollout --on-new-weights interrupt). The row's version is then taken as the
// oldest of its model tokens' versions if that is older than the version column says, so the
// staleness bound is applied to the oldest token (rl-rollout writes it so already); and ref_logprobs (f32
// tensor, one per response token: the reference model's, written by `rl-train score`) when the
// row has one.
// Thread safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/reward_limit.h"  // kMaxReward
#include "rl/core/status.h"
#include "rl/model/config.h"
#include "rl/queue/protocol.h"

namespace rl::train {

struct Sample {
  uint64_t index = 0;  // the row in rl-queue
  std::vector<int64_t> prompt_ids, response_ids;
  std::vector<float> logprobs;
  double reward = 0;
  int64_t version = 0;
  std::vector<int64_t> loss_mask;  // empty: all ones
  std::vector<int64_t> token_versions;  // empty: every token is `version`'s (tests build samples by aggregate up to here)
  std::vector<float> ref_logprobs = {};  // the reference model's per response token; empty: none given
  // Multi-turn rows: per turn, one past its last model token in response_ids (-1: unknown) and its
  // reward (advantage.h, "Turn rewards"); empty for single-turn rows.
  std::vector<int64_t> turn_ends = {};
  std::vector<float> turn_rewards = {};
  // Routing replay (a mixture of experts; rl-rollout --record-routes): [N, S, k] row-major, the
  // experts each of the first N tokens of prompt_ids + response_ids used in each of the model's S
  // sparse layers; N <= P + R - 1 (tokens past N route freely). Empty: none, or not asked for.
  std::vector<int32_t> routes = {};
  // How the reference that wrote ref_logprobs routed (ref_loop.h, kRefRoutingColumn): "replayed",
  // "own", or empty when the row does not say (a dense reference, or one before the column).
  std::string ref_routing = {};
};

// What GroupsOf checks a row's `routes` column against (Sample::routes): the trainer's model's
// sparse layers S, experts per token k and experts E. S = 0: the column is not read.
struct RouteLimits {
  int64_t sparse_layers = 0, per_token = 0, experts = 0;
};


// What a row's tokens are checked against: ids in [0, vocab_size), and prompt + response at most
// `context` tokens, the most a forward of the model takes (0: not checked).
struct TokenLimits {
  int64_t vocab_size = 0, context = 0;
};
TokenLimits TokenLimitsOf(const model::ModelConfig& config);
// DataError naming the row when s's prompt_ids and response_ids break `limits`. A row the model
// cannot take is malformed for this role: a forward over it fails, and with it the step (and the
// row, leased again, would fail the next one).
Status CheckTokens(const queue::GotRow& row, const Sample& s, const TokenLimits& limits);

struct Group {
  std::string key;
  std::vector<Sample> samples;
};

// The rows of a get, grouped by their group column in order of first appearance. DataError names
// the row and column when a column is missing or has the wrong type, or the reward is not finite
// or above kMaxReward in size, or the version negative, or logprobs and
// response_ids differ in length or a logprob is not a finite float, or with `tokens` limits a
// token is outside the vocabulary or the row longer than the context, or loss_mask is not one 0 or 1 per response token, or
// ref_logprobs is not one float per response token, or turn_ends and turn_rewards (optional,
// together) differ in length or hold an end outside [-1, length], or, with `routes` limits, the
// routes column is not an integer [N, S, k] tensor with N <= P + R - 1 and k distinct experts in
// [0, E) per token and layer.
Result<std::vector<Group>> GroupsOf(const std::vector<queue::GotRow>& rows, const RouteLimits& routes = {},
                                    const TokenLimits& tokens = {});

// Reads a row's routes column into s->routes (s's prompt_ids and response_ids read already),
// checked as GroupsOf checks it. OK, leaving s->routes empty, without the column or without
// limits (sparse_layers 0); DataError naming the row for a malformed one (s->routes untouched).
Status ReadRoutes(const queue::GotRow& row, const RouteLimits& limits, Sample* s);

// Whether s's routes reach every position its trained tokens are predicted from: a trained
// response token j is predicted at position P + j - 1, which needs N > P + j - 1. A row that
// records fewer (a client that recorded the response alone) trains those tokens with free routing.
// True without routes or limits.
bool RoutesCoverTrainedTokens(const Sample& s, const RouteLimits& limits);

// The tokens a sample is trained on: its loss mask's ones, all of its response without one.
int64_t TrainedTokens(const Sample& s);

// A warning when s's ref_logprobs were computed with other routing than the trainer's
// (`replay`: its --routing-replay) uses for the same row: a reference that routed on its own while
// the policy replays the row's routes, or the reverse. Empty when they agree or the row does not
// say. Either way the KL term would compare differently routed networks.
std::string RefRoutingMismatch(const Sample& s, bool replay);

// The limits of routes for `config` (its sparse layers, experts per token, experts), when
// `replay`; none (the column is not read) otherwise or for a dense model.
RouteLimits RouteLimitsOf(const model::ModelConfig& config, bool replay);

// The rows of a get sorted out as a trainer takes them: GroupsOf's checks, row by row, so that one
// malformed row costs its group, not the get. A group with a malformed row is left out whole (its
// advantages need every member); a row with no group column is left out alone. A row whose
// routes column alone is malformed is kept without routes (it trains with its own routing).
struct SortedRows {
  std::vector<Group> groups;      // those whose every row is well formed, in order of first appearance
  std::vector<uint64_t> dropped;  // the indices of the rows left out
  int64_t bad_rows = 0;           // the malformed rows among them
  Status error;                   // the first malformed row's DataError (OK: none)
  std::vector<uint64_t> unreplayable;  // the indices of rows kept without their malformed routes
  Status routes_error;                 // the first of those
};
SortedRows SortRows(const std::vector<queue::GotRow>& rows, const RouteLimits& routes = {},
                    const TokenLimits& tokens = {});

// Trained tokens (loss mask 1) of the groups, and how many of them were sampled with weights older
// than `version` (per token when a row has token_versions, else the row's version): how off-policy
// the batch is for a trainer at `version`.
struct TokenAge {
  int64_t tokens = 0, older = 0;
};
TokenAge TokenAgeOf(const std::vector<Group>& groups, int64_t version);

}  // namespace rl::train
