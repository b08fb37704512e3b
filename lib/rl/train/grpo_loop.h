// The GRPO learning loop of rl-train, against rl-queue (docs/design.md "How data flows").
//
// Each step: feed prompts so that (1 + staleness) steps' worth of groups are in flight; take whole
// groups from task `train` (version >= current - staleness, uniform-reward groups dropped when
// dynamic sampling is on) until a batch of prompts_per_step groups is complete, starting the
// forward/backward passes once start_fraction of it has arrived; one AdamW step; then a snapshot
// in memory (served at once over UCX with a publisher: weight_publisher.h), written in the
// background as ckpt-<step> and published as weights-<version>, after
// which the batch's rows are acked and the metadata train.step / train.version set.
// Modes (docs/design.md "Training modes"): sync k=0 f=1; semi-sync k=1 f=0.5; async k=1 f=0.
// On start it resumes from the newest complete checkpoint (acking the rows it holds the update
// of), else from --weights or <checkpoint-dir>/weights-0.safetensors (the SFT result), else from
// the weights of the --model directory.
// Prompts come from a dataset file (--prompts) through --model's tokenizer and chat template
// (feeder.h); held-out evaluations take the first eval_size examples of --eval-data, scored by
// --verifier.
// Data-parallel (world > 1, docs/design.md "Data-parallel training"): every rank runs this loop in
// lockstep over a c10d group. Each takes its token-balanced part of the step's groups from the
// queue (balanced gets, parts = world) and trains on it alone; the gradients are all-reduced
// (grpo_trainer.h). Rank 0 alone feeds prompts, evaluates, publishes weights and writes the
// checkpoint, which lists every rank's rows, and acks them all once it is durable. A dead rank
// makes the others' next collective fail (Unavailable) and they exit; the group re-forms under a
// fresh name (group_epoch) from the newest checkpoint.
// Thread safety: RunGrpo runs on the calling thread plus one checkpoint writer thread (and the
// weight publisher's thread and source thread when it serves weights).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "rl/core/status.h"
#include "rl/model/prompt_flags.h"
#include "rl/train/grpo_trainer.h"
#include "rl/train/weight_publisher.h"

namespace rl::train {

struct GrpoLoopOptions {
  std::string connect = "tcp://127.0.0.1:5555";
  double timeout_s = 60;
  std::string checkpoint_dir, prompts, weights, run_dir, id = "0";
  model::PromptFlags prompt;  // --model and how records become prompt ids
  std::string eval_data;      // held-out examples; empty: no evaluations
  std::string verifier = "math";
  int64_t eval_max_new_tokens = 0;
  int64_t group_size = 8;
  int64_t prompts_per_step = 64;
  int64_t max_steps = 0;  // 0: until stopped
  int64_t staleness = 0;  // k
  double start_fraction = 1.0;  // f
  bool dynamic_sampling = true;
  // Groups the queue may drop (uniform rewards, or stale rows with regenerate_stale off) while one
  // step's batch fills. Past it the step trains on the groups it has; with none, RunGrpo stops
  // with DataError (every group had equal rewards: the task is too easy or too hard).
  int64_t max_redraws = 256;
  bool regenerate_stale = true;
  double lease_s = 60;
  int64_t eval_every = 5;
  int64_t eval_size = 256;
  int keep = 3;
  WeightPublisherOptions publish;  // bind empty: weight versions go out as files only
  double collapse_drop = 0.25;
  uint64_t seed = 0;
  GrpoOptions grpo;
  int world = 1, rank = 0;        // data-parallel ranks
  std::string rendezvous;         // HOST:PORT of the group's c10d store (rank 0 hosts it)
  std::string group_epoch = "0";  // names this forming of the group (the watchdog's RL_GROUP_EPOCH)
  double group_timeout_s = 120;   // for the rendezvous and each collective
  // With advantage gae: config.json text of the critic's backbone, a model of its own (usually
  // smaller than the policy) initialised from `seed`; empty: a copy of the policy.
  std::string critic_config;
  // With grpo.sft_coef > 0: the SFT examples mixed into every update (JSON lines of prompt, or
  // messages, and response, read as rl-train sft reads --data, through the same encoder).
  std::string sft_data;
  std::string sft_response_key = "response";  // as rl-train sft's --response-key
  bool sft_response_key_given = false;
};

// Sets staleness and start_fraction from "sync", "semi-sync" or "async"; InvalidArgument otherwise.
Status ApplyMode(const std::string& mode, GrpoLoopOptions* o);

// Runs until max_steps or *stop. Unavailable when rl-queue cannot be reached.
Status RunGrpo(const GrpoLoopOptions& options, const std::atomic<bool>& stop);

}  // namespace rl::train
