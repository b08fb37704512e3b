// Hugging Face model directories: load a model from one, save a model as one.
//
// A directory holds
//   config.json                    the ModelConfig (rules in config.h)
//   model.safetensors              every weight, under the names of transformer_module.h
//   or model.safetensors.index.json  {"metadata": {...}, "weight_map": {"<tensor>": "<shard>"}}
//      with the shards it names (plain file names in the same directory) instead
//   tokenizer.json, tokenizer_config.json, generation_config.json, ...   (not read here)
// Weights may be float32, float16 or bfloat16 (mixed too); they are converted to the compute
// dtype on load. When model.safetensors exists it is used (as transformers does) and any index
// ignored. Tensors the model does not use are refused, except "*.rotary_emb.inv_freq" (written by
// old conversions) and lm_head.weight when the embeddings are tied (a copy some exports keep).
//
// Errors, each one line naming the file and, where there is one, the tensor:
//   Config      config.json breaks a rule of config.h
//   DataError   no config.json, no weights file, a shard named by the index is missing, an index
//               that is not {"weight_map": {name: file}}, a tensor missing, repeated, unexpected,
//               of the wrong shape or of a dtype other than F32/F16/BF16, weight files too small
//               for the config (checked before anything is allocated)
//   Corruption  a weights file that does not follow the safetensors grammar (truncated, ...)
//   IOError     the system refused a read or write
// Thread safety: free functions; the model must not change during SaveHfModel.
#pragma once

#include <cstdint>
#include <string>

#include "rl/core/status.h"
#include "rl/model/config.h"
#include "rl/model/transformer.h"

namespace rl::model {

struct HfLoadOptions {
  DType dtype = DType::kF32;  // the compute dtype
  int64_t context = 0;        // > 0: cap the context bound (rl_context) at this many positions
};

// config.json of `dir`, parsed and validated.
Result<ModelConfig> ReadHfConfig(const std::string& dir);

// The model in `dir`: its config and every weight, converted to options.dtype.
Result<Transformer> LoadHfModel(const std::string& dir, const HfLoadOptions& options = {});

// The tokenizer and generation files SaveHfModel copies when they exist in tokenizer_from.
extern const char* const kHfTokenizerFiles[];

struct HfSaveOptions {
  DType dtype = DType::kF32;   // of the saved tensors; config.json's torch_dtype says it
  std::string tokenizer_from;  // a directory whose kHfTokenizerFiles are copied; empty: none
};

// Writes `dir` as an HF model directory: config.json (the model's config, torch_dtype set to
// options.dtype), model.safetensors (metadata {"format": "pt"}, as transformers expects) and the
// tokenizer files. Atomic: everything is written and synced in "<dir>.tmp" first, which then
// takes the place of `dir` (an existing `dir` is replaced whole, by an atomic exchange where the
// file system allows). IOError from the system; NotFound when tokenizer_from does not exist.
Status SaveHfModel(const std::string& dir, const Transformer& model,
                   const HfSaveOptions& options = {});

}  // namespace rl::model
