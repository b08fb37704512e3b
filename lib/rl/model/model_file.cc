#include "rl/model/model_file.h"

#include <cerrno>
#include <cstdlib>

#include "rl/core/fs.h"
#include "rl/model/safetensors.h"

namespace rl::model {
namespace {

constexpr const char* kFormat = "roleflow-model-2";

struct Header {
  ModelConfig config;
  uint64_t version = 0;
};

Result<uint64_t> ParseVersion(const std::string& text) {
  if (text.empty() || text.size() > 20 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return Status::Corruption("model file: rl_version \"" + text + "\" is not a decimal number");
  }
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE) return Status::Corruption("model file: rl_version out of range");
  return static_cast<uint64_t>(v);
}

Result<Header> ParseHeader(const Metadata& metadata) {
  const auto config = metadata.find("rl_config");
  const auto version = metadata.find("rl_version");
  if (config == metadata.end() || version == metadata.end()) {
    return Status::Corruption("model file: metadata lacks rl_config or rl_version");
  }
  Header h;
  auto parsed = ConfigFromString(config->second);
  if (!parsed.ok())
    return Status::Corruption("model file: rl_config: " + parsed.status().message());
  h.config = *parsed;
  RL_ASSIGN_OR_RETURN(h.version, ParseVersion(version->second));
  return h;
}

}  // namespace

Result<std::string> EncodeModel(const Transformer& model, uint64_t version) {
  const Metadata metadata = {{"rl_config", ConfigToString(model.config())},
                             {"rl_version", std::to_string(version)},
                             {"rl_format", kFormat}};
  return EncodeSafetensors(model.NamedParameters(), metadata);
}

Status CheckParameterCount(const ModelConfig& config, const NamedTensors& tensors, const std::string& what) {
  auto expected = ParameterCount(config);
  if (!expected.ok()) return Status::Corruption(what + ": rl_config: " + expected.status().message());
  int64_t held = 0;
  for (const auto& [name, t] : tensors) held += t.numel();
  if (held != *expected) {
    return Status::DataError(what + ": " + std::to_string(held) + " parameters for a config of " +
                             std::to_string(*expected));
  }
  return Status::OK();
}

Result<LoadedModel> DecodeModel(std::string_view bytes) {
  RL_ASSIGN_OR_RETURN(SafetensorsContents contents, DecodeSafetensors(bytes));
  RL_ASSIGN_OR_RETURN(Header header, ParseHeader(contents.metadata));
  RL_RETURN_IF_ERROR(CheckParameterCount(header.config, contents.tensors, "model file"));
  DType dtype = DType::kF32;
  if (!contents.tensors.empty()) {
    const at::ScalarType t = contents.tensors.front().second.scalar_type();
    if (t == at::kBFloat16) dtype = DType::kBF16;
    if (t == at::kHalf) dtype = DType::kF16;
  }
  RL_ASSIGN_OR_RETURN(Transformer model, Transformer::Create(header.config, 0, dtype));
  RL_RETURN_IF_ERROR(model.LoadNamedParameters(contents.tensors));
  return LoadedModel{std::move(model), header.version};
}

Result<uint64_t> LoadModelWeights(std::string_view bytes, Transformer* model) {
  RL_ASSIGN_OR_RETURN(SafetensorsContents contents, DecodeSafetensors(bytes));
  RL_ASSIGN_OR_RETURN(Header header, ParseHeader(contents.metadata));
  if (header.config != model->config()) {
    return Status::DataError("model file: weights are for config " + ConfigToString(header.config) +
                             ", the model has " + ConfigToString(model->config()));
  }
  RL_RETURN_IF_ERROR(model->LoadNamedParameters(contents.tensors));
  return header.version;
}

Status SaveModelFile(const std::string& path, const Transformer& model, uint64_t version) {
  RL_ASSIGN_OR_RETURN(std::string bytes, EncodeModel(model, version));
  return WriteFileAtomic(path, bytes);
}

Result<LoadedModel> LoadModelFile(const std::string& path) {
  RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto loaded = DecodeModel(bytes);
  if (!loaded.ok()) return loaded.status().WithContext(path);
  return loaded;
}

}  // namespace rl::model
