// Export: a trained version as a Hugging Face model directory (hf_dir.h) that other tools load as
// any checkpoint. The source is a model file or weight bundle (model_file.h, e.g.
// weights-N.safetensors) or a trainer checkpoint (checkpoint.h, ckpt-*.safetensors: its policy
// tensors and config; the optimizer state stays in the checkpoint). The directory is written
// atomically by SaveHfModel.
// Errors: IOError when a file cannot be read or the directory written, or `out` exists and is not
// a directory, or is a non-empty directory without config.json (never replaced: it is not ours);
// Corruption/DataError for a file that is no model file or checkpoint; NotFound when
// tokenizer_from has no tokenizer.json.
// Thread safety: free functions over values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/model/config.h"
#include "rl/model/model_file.h"

namespace rl::train {

// The model in a model file, a weight bundle or a trainer checkpoint (told apart by rl_format).
Result<model::LoadedModel> LoadAnyModelFile(const std::string& path);

struct ExportOptions {
  std::string out;                   // the directory to write
  std::string tokenizer_from;        // empty: no tokenizer files
  std::optional<model::DType> dtype;  // of the saved tensors; nullopt: the model's own
};

struct ExportReport {
  uint64_t version = 0;
  int64_t parameters = 0;  // distinct parameters (tied embeddings counted once)
  model::DType dtype = model::DType::kF32;
  std::vector<std::string> files;  // the names written in `out`, sorted
};

// The checks ExportHfDir makes before writing (out may be replaced, tokenizer_from has
// tokenizer.json), for a caller that exports later, such as rl-train grpo after its last step.
Status CheckExportTargets(const ExportOptions& options);

// Writes `loaded` as the HF directory options.out.
Result<ExportReport> ExportHfDir(const model::LoadedModel& loaded, const ExportOptions& options);

}  // namespace rl::train
