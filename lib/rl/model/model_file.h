// Model files: a Transformer's weights, its ModelConfig and a weight version as one safetensors
// file (or the same bytes in memory, a weight bundle).
//
// Layout: one tensor per parameter under its Hugging Face name (transformer_module.h), in the
// model's compute dtype (float32 unless chosen otherwise), plus
//   __metadata__ = {"rl_config": <config.json text, ConfigToString(config)>,
//                   "rl_version": "<decimal u64>", "rl_format": "roleflow-model-2"}
// Any safetensors reader can open the file; DecodeModel needs rl_config and rl_version. The
// tensors and rl_config together are an HF model (config.json + model.safetensors) in one file.
// (roleflow-model-1, before the HF layout, had other names and configs; it no longer loads.)
// Thread safety: free functions; the model must not be changed by another thread during a call.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "rl/core/status.h"
#include "rl/model/transformer.h"

namespace rl::model {

struct LoadedModel {
  Transformer model;
  uint64_t version;
};

Result<std::string> EncodeModel(const Transformer& model, uint64_t version);

// A new model built from the file's config, holding its weights, computing in the dtype of the
// file's tensors (float32 when they are float32). Corruption when the bytes are
// not valid safetensors or rl_config/rl_version are missing or malformed; DataError when the
// tensors do not match the config.
Result<LoadedModel> DecodeModel(std::string_view bytes);

// What a loader checks before it builds a model of `config` for `tensors`: Corruption when the
// config is invalid, DataError when the tensors do not hold exactly its parameter count. A file's
// config must not make us allocate more than the file holds. `what` starts the message.
Status CheckParameterCount(const ModelConfig& config, const NamedTensors& tensors, const std::string& what);

// Loads the weights into an existing model (a rollout switching versions) and returns the
// version. DataError if the file's config differs from model->config(); the model is unchanged
// on any error.
Result<uint64_t> LoadModelWeights(std::string_view bytes, Transformer* model);

// File forms of the above; the writer replaces `path` atomically.
Status SaveModelFile(const std::string& path, const Transformer& model, uint64_t version);
Result<LoadedModel> LoadModelFile(const std::string& path);

}  // namespace rl::model
