#include "rl/model/model_dir.h"

#include <filesystem>

namespace rl::model {
namespace {

// The id of a token tokenizer_config.json names, or the tokenizer's own when it names none.
Result<int64_t> SpecialId(const ModelDir& m, const std::string& name, const char* field, int64_t fallback) {
  if (name.empty()) return fallback;
  std::optional<int64_t> id = m.tokenizer->TokenToId(name);
  if (!id) {
    return Status::Config(m.path + "/tokenizer_config.json: " + field + " '" + name + "' is no token of the tokenizer");
  }
  return *id;
}

}  // namespace

Result<ModelDir> OpenModelDir(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return Status::NotFound(dir + ": no such model directory");
  ModelDir m;
  m.path = dir;
  RL_ASSIGN_OR_RETURN(m.config, ReadHfConfig(dir));
  auto loaded = tokenizer::LoadTokenizer(dir);  // its errors name the file
  if (!loaded.ok()) return loaded.status();
  m.tokenizer = std::move(loaded->tokenizer);
  m.tokenizer_config = std::move(loaded->config);
  const tokenizer::TokenizerConfig& tc = m.tokenizer_config;
  RL_ASSIGN_OR_RETURN(m.bos_id, SpecialId(m, tc.bos_token, "bos_token", m.tokenizer->bos_id()));
  RL_ASSIGN_OR_RETURN(m.eos_id, SpecialId(m, tc.eos_token, "eos_token", m.tokenizer->eos_id()));
  RL_ASSIGN_OR_RETURN(m.pad_id, SpecialId(m, tc.pad_token, "pad_token", m.tokenizer->pad_id()));
  if (m.eos_id < 0) {
    return Status::Config(dir + ": no eos token (tokenizer_config.json eos_token): responses could not end");
  }
  if (m.pad_id < 0) m.pad_id = m.eos_id;
  if (m.tokenizer->vocab_size() > m.config.vocab_size) {
    return Status::Config(dir + ": the tokenizer has " + std::to_string(m.tokenizer->vocab_size()) +
                          " tokens but config.json vocab_size is " + std::to_string(m.config.vocab_size) +
                          ": the embedding has no row for some ids");
  }
  m.has_weights = std::filesystem::exists(dir + "/model.safetensors", ec) ||
                  std::filesystem::exists(dir + "/model.safetensors.index.json", ec);
  return m;
}

Status CheckVocabulary(const Transformer& model, const ModelDir& dir, const std::string& what) {
  if (model.config().vocab_size == dir.config.vocab_size) return Status::OK();
  return Status::Config(what + " has a vocabulary of " + std::to_string(model.config().vocab_size) + ", --model " +
                        dir.path + " of " + std::to_string(dir.config.vocab_size) + ": not a model of its tokenizer");
}

Result<Transformer> InitialModel(const ModelDir& dir, uint64_t seed, const HfLoadOptions& options) {
  if (dir.has_weights) return LoadHfModel(dir.path, options);
  ModelConfig config = dir.config;
  if (options.context > 0) config.rl_context = std::min(options.context, config.context());
  return Transformer::Create(config, seed, options.dtype);
}

}  // namespace rl::model
