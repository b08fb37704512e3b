// Trainer checkpoints: everything rl-train needs to go on after a kill -9, as one safetensors file
// <checkpoint-dir>/ckpt-<step, 8 digits>.safetensors:
//   tensors  "model.<name>" (the policy), "adam.m.<name>", "adam.v.<name>" (optimizer moments);
//            with a critic (PPO with GAE) also "critic.<name>" (value_model.h's names) and
//            "critic_adam.m.<name>", "critic_adam.v.<name>"; a 16-bit policy also has its float32
//            masters, "adam.master.<name>" (adamw.h). The policy is in its compute dtype (float32,
//            bfloat16 or float16), the optimizer's tensors in float32, all copied to host memory
//            first. The policy is rebuilt in its tensors' dtype and the masters restored, so a
//            bf16 run resumes as the same bf16 run, bit for bit.
//   __metadata__ {"rl_format": "roleflow-train-1", "rl_config": <ModelConfig JSON>,
//                 "step": "<n>", "version": "<n>", "adam_steps": "<n>", "cursor": "<n>",
//                 "rng": "<std::mt19937_64 state as text>", "consumed": "[<row index>, ...]",
//                 "extra": "<JSON object>"[, "critic_adam_steps": "<n>" with a critic]}
// `consumed` lists the rows of task `train` the step trained on: a restarted trainer acks them,
// so rows whose update the checkpoint holds are never trained again. Files are written whole
// (temporary file, fsync, rename, directory fsync), so any ckpt-*.safetensors that decodes is
// complete.
// Thread safety: the free functions work on values; CheckpointWriter is used from one thread and
// runs its jobs on its own.
#pragma once

#include <nlohmann/json.hpp>

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/transformer.h"

namespace rl::train {

struct Checkpoint {
  int64_t step = 0;
  uint64_t version = 0;
  uint64_t cursor = 0;
  std::string rng;  // std::mt19937_64 state, as operator<< writes it
  std::vector<uint64_t> consumed;
  nlohmann::json extra = nlohmann::json::object();
  std::optional<model::Transformer> model;  // an independent copy (a snapshot)
  model::NamedTensors adam;                 // AdamW::State()
  int64_t adam_steps = 0;
  model::NamedTensors critic;       // ValueModel::NamedParameters() copies; empty without a critic
  model::NamedTensors critic_adam;  // its AdamW::State()
  int64_t critic_adam_steps = 0;
};

Result<std::string> EncodeCheckpoint(const Checkpoint& c);
Result<Checkpoint> DecodeCheckpoint(const std::string& bytes);

std::string CheckpointPath(const std::string& dir, int64_t step);
std::string WeightsPath(const std::string& dir, uint64_t version);
// Steps of the ckpt-*.safetensors files in dir, ascending (no check of their contents).
std::vector<int64_t> ListCheckpoints(const std::string& dir);
// The newest checkpoint in dir that decodes; nullopt when there is none. Files that fail to
// decode are reported at warn level and skipped.
Result<std::optional<Checkpoint>> LoadNewestCheckpoint(const std::string& dir);

// Writes checkpoints on a background thread, one at a time. Submit waits while a previous job is
// still running (so at most one snapshot waits in memory), then returns at once; the job writes
// the checkpoint, publishes weights-<version>.safetensors, removes all but the newest `keep`
// checkpoints and weight files (never weights-0), and then calls `after` on the writer thread.
class CheckpointWriter {
 public:
  using After = std::function<void(const Checkpoint&, const Status&)>;
  CheckpointWriter(std::string dir, int keep, After after);
  ~CheckpointWriter();  // finishes the pending job

  void Submit(Checkpoint c);
  // Blocks until no job is pending; returns the last job's status.
  Status Wait();
  double last_write_seconds() const { return last_seconds_; }

 private:
  void Run();
  Status Write(const Checkpoint& c);
  void Prune() const;

  std::string dir_;
  int keep_;
  After after_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Checkpoint> job_;
  bool busy_ = false, quit_ = false;
  Status last_;
  double last_seconds_ = 0;
  std::thread thread_;
};

}  // namespace rl::train
