// rl-profile adaptive: adaptive tensor parallelism measured on one model, run as one process per
// rank (examples/pipelines/adaptive-tp.sh starts them). It profiles decoding at every degree of
// ProfiledDegrees (decode_grid.h: 1, 2, 4, ... dividing the ranks, and N), then runs two
// workloads of greedy generation, a long-tail one (most responses short, a few at the limit, as in
// reasoning workloads) and a uniform one, each static at every profiled degree t (N/t replicas of
// degree t) and adaptive (from degree 1, widening as the predictor says, possibly several times);
// it times a naive switch (a fresh process loading the model, a fresh group, the prefill of the
// moved sequences) and checks the predictor on the real trajectories. Rank 0 prints the table
// and a last line:
//   adaptive/best-static: long-tail X.XX uniform X.XX; switch/naive-restart X.XX; predictor error X.X%
// Response lengths are set per prompt (eos off), so every run does the same work. On GPUs
// (--device cuda) each rank's model is on its GPU; the profile then predicts GPU decoding.
#pragma once

#include <cstdint>
#include <string>

#include "rl/core/options.h"
#include "rl/profile/cli.h"

namespace rl::dist {

struct AdaptiveProfileOptions {
  std::string model;             // a Hugging Face model directory (weights optional: random init)
  int ranks = 2;                 // the group's size
  int rank = 0;
  std::string rendezvous;        // HOST:PORT of the group's store (rank 0 listens)
  int64_t prompts = 32;
  int64_t prompt_tokens = 16;
  int64_t slots = 8;             // per data-parallel replica
  int64_t max_new_tokens = 192;  // the long tail's length (and the context's bound)
  int64_t short_tokens = 16;     // the typical short response
  double tail = 0.1;             // fraction of long responses in the long-tail workload
  int check_every = 4;
  double margin = 0.05;  // AdaptiveOptions::margin
  int steps = 4;                 // decode steps timed per profile point
  int repeats = 1;               // runs of each configuration, interleaved; the median time is reported
  int threads = 1;               // libtorch threads per rank
  std::string device = "cpu";    // --device: "cuda" is cuda:rank modulo the GPUs seen (OpenRankDevice)
  std::string precision = "float32";  // or "bf16": the model's compute dtype
  uint64_t seed = 1;
  std::string profile_out;       // the measured profile, for rl-rollout run --adaptive-profile
  bool load_only = false;        // internal: load the model and exit (the naive switch's restart)
  bool json = false;
};

profile::Subcommand AddAdaptiveProfile(CommandLine& cl);

}  // namespace rl::dist
