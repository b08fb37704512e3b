// Sample and Group: the rows of task `train` as the trainer sees them, decoded from a queue get.
//
// Columns read (the pipeline contract, man/rl-train.1): prompt_ids (i64 tensor, with <bos>),
// response_ids (i64 tensor), logprobs (f32 tensor, one per response token), reward (number),
// version (int), group (the prompt's group key); and loss_mask (integer tensor of 0/1, one per
// response token) when the row has one: a multi-turn conversation's tool tokens are 0, left out
// of every loss and count (no column: every response token is trained on); and ref_logprobs (f32
// tensor, one per response token: the reference model's, written by `rl-train score`) when the
// row has one.
// Thread safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/queue/protocol.h"

namespace rl::train {

struct Sample {
  uint64_t index = 0;  // the row in rl-queue
  std::vector<int64_t> prompt_ids, response_ids;
  std::vector<float> logprobs;
  double reward = 0;
  int64_t version = 0;
  std::vector<int64_t> loss_mask;  // empty: all ones
  // Tests build samples by aggregate: members added later go last.
  std::vector<float> ref_logprobs;  // the reference model's per response token; empty: none given
};

struct Group {
  std::string key;
  std::vector<Sample> samples;
};

// The rows of a get, grouped by their group column in order of first appearance. DataError names
// the row and column when a column is missing or has the wrong type, or logprobs and
// response_ids differ in length, or loss_mask is not one 0 or 1 per response token, or
// ref_logprobs is not one float per response token.
Result<std::vector<Group>> GroupsOf(const std::vector<queue::GotRow>& rows);

}  // namespace rl::train
