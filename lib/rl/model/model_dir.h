// ModelDir: what a role knows about the model it holds, from a Hugging Face model directory
// (--model DIR): the architecture (config.json), the tokenizer (tokenizer.json, or Llama 2's
// SentencePiece tokenizer.model: tokenizer/load.h; and tokenizer_config.json) and its special
// tokens, and whether the directory has weights.
//
// Special ids: bos, eos and pad come from tokenizer_config.json's bos_token, eos_token and
// pad_token when it names them (a name the tokenizer does not have is a Config error), else from
// the tokenizer itself. eos ends every response, so a directory without one is a Config error;
// pad falls back to eos (padding is masked, its id only has to be a valid one); bos is -1 where
// there is none (Qwen). Every id the tokenizer can give must be a row of the embedding
// (tokenizer vocabulary <= config vocab_size, which is often padded above it): Config otherwise.
// Weights (model.safetensors or model.safetensors.index.json) are optional: a directory with
// only the config and tokenizer describes a model to initialise at random (InitialModel).
// Thread safety: a ModelDir is immutable once opened; the tokenizer may be used from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "rl/core/status.h"
#include "rl/model/config.h"
#include "rl/model/hf_dir.h"
#include "rl/model/tokenizer/load.h"
#include "rl/model/tokenizer/tokenizer.h"
#include "rl/model/transformer.h"

namespace rl::model {

struct ModelDir {
  std::string path;
  ModelConfig config;
  std::shared_ptr<const Tokenizer> tokenizer;
  tokenizer::TokenizerConfig tokenizer_config;
  int64_t bos_id = -1, eos_id = -1, pad_id = -1;
  bool has_weights = false;
};

// Reads and checks config.json, the tokenizer and tokenizer_config.json of `dir` (not the
// weights). NotFound when `dir` or a required file is missing; Config for a file that breaks a
// rule; DataError for one that is not JSON.
Result<ModelDir> OpenModelDir(const std::string& dir);

// OK when `model` reads dir's token ids (the same vocab_size); Config otherwise, naming `what`
// (the weights' origin). Weights of another shape are fine (a model trained with --model-config).
Status CheckVocabulary(const Transformer& model, const ModelDir& dir, const std::string& what);

// The model to start from: the directory's weights when it has them (converted to
// options.dtype), else a random initialisation from `seed` (model::Transformer::Create).
Result<Transformer> InitialModel(const ModelDir& dir, uint64_t seed, const HfLoadOptions& options = {});

}  // namespace rl::model
