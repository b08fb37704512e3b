// The subcommands of rl-train, behind the command line (cli.cc). Each returns an exit code.
#pragma once

#include <CLI/CLI.hpp>

#include <atomic>
#include <istream>
#include <ostream>
#include <string>

#include "rl/core/fail.h"
#include "rl/core/status.h"
#include "rl/model/config.h"
#include "rl/model/prompt_flags.h"
#include "rl/train/evaluate.h"
#include "rl/train/grpo_loop.h"
#include "rl/train/sft.h"

namespace rl::train {

struct SftFlags {
  std::string data, checkpoint_dir, weights, run_dir, id = "0";
  model::PromptFlags prompt;             // --model (weights, or a random start) and encoding
  std::string model_config;              // set: a random start of this config instead
  std::string response_key = "response";
  CLI::Option* response_key_option = nullptr;  // given: overrides the messages default
  std::string eval_data, verifier = "math";
  int64_t eval_size = 256;
  int threads = 1;
  std::string device = "cpu";  // --device (device.h)
  std::string precision = "float32";
  SftOptions sft;
  std::string lr_decay = "constant";  // see rl/train/lr_schedule.h
  std::string result_open, result_close;  // both set: tool results in responses are not trained on
};

struct GrpoFlags {
  GrpoLoopOptions loop;
  int threads = 1;
  std::string device = "cpu";  // --device (device.h)
  std::string precision = "float32";
  std::string loss_norm = "token", mode = "sync", stale_rows = "regenerate", lr_decay = "constant";
  std::string correction = "none", advantage = "grpo", kl_estimator = "k3";
  CLI::Option* staleness = nullptr;  // set when given: they override --mode
  CLI::Option* fraction = nullptr;
  CLI::Option* response_key_option = nullptr;  // given: --sft-data's responses are under it
  CLI::Option* world = nullptr;  // given: they win over WORLD_SIZE, RANK (torchrun) and srun's
  CLI::Option* rank = nullptr;
  int64_t staleness_value = 0;
  double fraction_value = 1.0;
  std::string export_dir, tokenizer_from;  // export_dir: the final version as an HF directory
};

struct ScoreFlags {  // rl-train score (ref_command.cc)
  std::string model, weights, task = "ref", connect = "tcp://127.0.0.1:5555", run_dir, id = "0";
  double timeout_s = 60, lease_s = 60, wait_s = 5, progress_s = 10, temperature = 1.0;
  uint32_t count = 64;
  int64_t micro_batch = 128;
  int threads = 1;
  std::string device = "cpu";  // --device (device.h)
  bool routing_replay = false;  // --routing-replay: score with the rows' routes (a mixture of experts)
};

struct EvalFlags {
  model::PromptFlags prompt;
  std::string weights, data, verifier = "math";  // weights empty: those of --model
  int64_t eval_size = 500;
  int threads = 1;
  std::string device = "cpu";  // --device (device.h)
  EvalOptions eval;
};

struct ExportFlags {
  std::string weights, out, tokenizer_from, dtype;  // dtype empty: the model's own
};

struct DataFlags {
  int64_t problems = 10000;
  uint64_t seed = 1;
  std::string task = "addition", response_format = "none";  // see rl/task/make_data.h
  bool heldout = false;
  int64_t max_number = 0;  // words only: every number at most this (0: no limit)
  std::string split = "numbers";  // words only: numbers or cast
};

constexpr char kTool[] = "rl-train";  // for rl::Fail

int RunSftCommand(SftFlags f, const std::atomic<bool>& stop);
int RunGrpoCommand(GrpoFlags f, const std::atomic<bool>& stop);
// The reference model's log-probabilities for the rows of a queue task, until stopped.
int RunScoreCommand(const ScoreFlags& f, const std::atomic<bool>& stop);
int RunEvalCommand(const EvalFlags& f, std::ostream& out);
// Prints {"out", "version", "parameters", "dtype", "files"} as one JSON line.
int RunExportCommand(const ExportFlags& f, std::ostream& out);
int RunMakeData(const DataFlags& f, std::ostream& out);
// Each JSON line of `in` with "prompt_ids" added: the ids the feeder would put for it.
int RunEncodeCommand(const model::PromptFlags& f, std::istream& in, std::ostream& out);

}  // namespace rl::train
