// Policy: the model a rollout samples from, the weight version it holds, and the checkpoint
// directory newer versions come from.
//
// Weight versions are files <dir>/weights-<version>.safetensors written atomically (temporary
// file, fsync, rename) by SaveModelFile, so a file with that exact name is complete; any other
// name (a temporary file) is ignored. The name is the pipeline's contract, so a file from the
// directory is used as the version its name gives; metadata (rl_version) that disagrees is
// logged. A file loaded by path (Load) has the version of its metadata.
// Thread safety: one thread; the model must not be in use by Generate while Refresh runs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "rl/core/status.h"
#include "rl/model/transformer.h"

namespace rl::rollout {

struct WeightsFile {
  std::string path;
  uint64_t version = 0;  // from the file name
};

std::string WeightsFileName(uint64_t version);  // "weights-12.safetensors"

// The file with the highest version in `dir`; nullopt when there is none or `dir` does not
// exist. IOError when `dir` cannot be read.
Result<std::optional<WeightsFile>> NewestWeights(const std::string& dir);

class Policy {
 public:
  // Every model the policy takes computes on `device` (model/device.h): a file or a pulled
  // version is decoded in host memory and copied to the device when it is taken, at a batch
  // boundary. With `dtype` every model is cast to it first, on the host (rl-rollout --precision:
  // a bf16 engine fed a float32 trainer's versions); without, a model computes in the dtype its
  // weights came in.
  explicit Policy(c10::Device device = c10::Device(c10::kCPU), std::optional<model::DType> dtype = std::nullopt)
      : device_(device), dtype_(dtype) {}
  // Loads a model file, replacing the current model (its config may differ).
  Status Load(const std::string& path);
  // At a batch boundary: loads the newest version in `dir` if it is newer than the current one.
  // Returns true when the policy switched. A file that fails to load is logged and not tried
  // again (the current weights stay); the next newer file is.
  Result<bool> Refresh(const std::string& dir);
  // The two halves of Refresh: the newest file in `dir` worth loading (nullopt: none), and
  // loading it (false when it failed: logged, and not offered by Newer again).
  Result<std::optional<WeightsFile>> Newer(const std::string& dir) const;
  bool Switch(const WeightsFile& file);
  // Uses a model that came another way (a verified UCX pull, weight_sync.h) as `version`;
  // `origin` names where from, and path() returns it. Internal when it does not fit the device;
  // the current model stays then. The caller's handle shares the model, cast and moved with it.
  Status Use(model::Transformer model, uint64_t version, std::string origin);

  bool loaded() const { return model_.has_value(); }
  // REQUIRES: loaded().
  const model::Transformer& model() const { return *model_; }
  uint64_t version() const { return version_; }
  const std::string& path() const { return path_; }

 private:
  // Casts (dtype_) and moves (device_) a model about to be taken.
  Status Take(model::Transformer& model, const std::string& origin) const;

  c10::Device device_;
  std::optional<model::DType> dtype_;
  std::optional<model::Transformer> model_;
  uint64_t version_ = 0;
  std::string path_;
  uint64_t seen_ = 0;  // the name version of the last file Refresh loaded
  std::optional<uint64_t> failed_version_;
};

}  // namespace rl::rollout
