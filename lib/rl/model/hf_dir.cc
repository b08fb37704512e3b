#include "rl/model/hf_dir.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fcntl.h>  // AT_FDCWD
#include <stdio.h>  // renameat2

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>
#include <vector>

#include "rl/core/fs.h"
#include "rl/model/safetensors.h"
#include "rl/model/torch_guard.h"

namespace rl::model {

const char* const kHfTokenizerFiles[] = {"tokenizer.json",
                                         "tokenizer_config.json",
                                         "generation_config.json",
                                         "special_tokens_map.json",
                                         "vocab.json",
                                         "merges.txt",
                                         "tokenizer.model",
                                         "added_tokens.json",
                                         "chat_template.jinja",
                                         nullptr};

namespace {

namespace fs = std::filesystem;

constexpr char kIndex[] = "model.safetensors.index.json";
constexpr char kSingle[] = "model.safetensors";

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

std::string Shape(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + std::to_string(sizes[i]);
  return s + "]";
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The shard file of each tensor: all in model.safetensors, or as the index says.
Result<std::map<std::string, std::string>> ReadWeightMap(const std::string& dir) {
  if (Exists(dir + "/" + kSingle)) return std::map<std::string, std::string>{};
  const std::string path = dir + "/" + kIndex;
  if (!Exists(path)) {
    return Status::DataError(dir + ": no " + kSingle + " or " + kIndex);
  }
  RL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("weight_map") || !j.at("weight_map").is_object()) {
    return Status::DataError(path + ": expected {\"weight_map\": {tensor: file}}");
  }
  std::map<std::string, std::string> out;
  for (const auto& item : j.at("weight_map").items()) {
    const std::string file = item.value().is_string() ? item.value().get<std::string>() : "";
    if (file.empty() || file == "." || file == ".." || file.find('/') != std::string::npos) {
      return Status::DataError(path + ": tensor '" + item.key() +
                               "' maps to a bad file name (plain names in the directory only)");
    }
    out[item.key()] = file;
  }
  return out;
}

// Refuses a config whose weights cannot fit in the files, before the model is allocated.
Status CheckSizes(const std::string& dir, const std::vector<std::string>& files,
                  const ModelConfig& config) {
  uintmax_t total = 0;
  for (const std::string& f : files) {
    std::error_code ec;
    const uintmax_t n = fs::file_size(dir + "/" + f, ec);
    if (ec) {
      return Status::DataError(dir + "/" + f + ": missing (named by " + kIndex + ")");
    }
    total += n;
  }
  RL_ASSIGN_OR_RETURN(int64_t params, ParameterCount(config));
  if (total / 2 < static_cast<uintmax_t>(params)) {
    return Status::DataError(dir + ": the weight files hold " + std::to_string(total) +
                             " bytes, too few for the config's " + std::to_string(params) +
                             " parameters (a truncated shard or the wrong config.json)");
  }
  return Status::OK();
}

class WeightLoader {
 public:
  WeightLoader(const std::string& dir, const Transformer& model,
               const std::map<std::string, std::string>& weight_map)
      : dir_(dir), tied_(model.config().tie_word_embeddings), weight_map_(weight_map) {
    for (const auto& [name, t] : model.NamedParameters()) params_.emplace(name, t);
  }

  Status LoadShard(const std::string& file) {
    const std::string path = dir_ + "/" + file;
    RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
    auto contents = DecodeSafetensors(bytes);
    if (!contents.ok()) return contents.status().WithContext(path);
    bytes = std::string();
    for (const auto& [name, t] : contents->tensors) RL_RETURN_IF_ERROR(Take(path, file, name, t));
    return Status::OK();
  }

  Status CheckComplete() const {
    for (const auto& [name, t] : params_) {
      if (seen_.count(name) == 0)
        return Status::DataError(dir_ + ": tensor '" + name + "' missing");
    }
    return Status::OK();
  }

 private:
  Status Take(const std::string& path, const std::string& file, const std::string& name,
              const at::Tensor& t) {
    auto it = params_.find(name);
    if (it == params_.end()) {
      if (EndsWith(name, ".rotary_emb.inv_freq") || (tied_ && name == "lm_head.weight")) {
        return Status::OK();
      }
      return Status::DataError(path + ": unexpected tensor '" + name + "'");
    }
    if (!weight_map_.empty() && weight_map_.at(name) != file) {
      return Status::DataError(path + ": tensor '" + name + "' is here, but " + kIndex +
                               " puts it in " + weight_map_.at(name));
    }
    const at::ScalarType type = t.scalar_type();
    if (type != at::kFloat && type != at::kHalf && type != at::kBFloat16) {
      return Status::DataError(path + ": tensor '" + name + "' is " + c10::toString(type) +
                               "; weights must be F32, F16 or BF16");
    }
    if (t.sizes() != it->second.sizes()) {
      return Status::DataError(path + ": tensor '" + name + "' has shape " + Shape(t.sizes()) +
                               ", the config needs " + Shape(it->second.sizes()));
    }
    if (!seen_.insert(name).second) {
      return Status::DataError(path + ": tensor '" + name + "' appears twice");
    }
    return TorchGuard("load weights", [&]() -> Status {
      c10::NoGradGuard no_grad;
      it->second.copy_(t);
      return Status::OK();
    });
  }

  std::string dir_;
  bool tied_;
  const std::map<std::string, std::string>& weight_map_;
  std::unordered_map<std::string, at::Tensor> params_;
  std::set<std::string> seen_;
};

Status CopyTokenizerFiles(const std::string& from, const std::string& to) {
  if (from.empty()) return Status::OK();
  std::error_code ec;
  if (!fs::is_directory(from, ec))
    return Status::NotFound("tokenizer directory " + from + " not found");
  for (const char* const* f = kHfTokenizerFiles; *f != nullptr; ++f) {
    const std::string src = from + "/" + *f;
    if (!Exists(src)) continue;
    RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(src));
    RL_RETURN_IF_ERROR(WriteFileAtomic(to + "/" + *f, bytes));
  }
  return Status::OK();
}

// Puts the finished directory `tmp` in the place of `dir`.
Status Publish(const std::string& tmp, const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    if (::rename(tmp.c_str(), dir.c_str()) != 0)
      return Status::IOError(ErrnoMessage("rename", tmp));
  } else if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp, ec);  // now the old directory
  } else {
    const std::string old = dir + ".old";
    fs::remove_all(old, ec);
    if (::rename(dir.c_str(), old.c_str()) != 0)
      return Status::IOError(ErrnoMessage("rename", dir));
    if (::rename(tmp.c_str(), dir.c_str()) != 0)
      return Status::IOError(ErrnoMessage("rename", tmp));
    fs::remove_all(old, ec);
  }
  const std::string parent = fs::path(dir).parent_path().string();
  return FsyncDir(parent.empty() ? "." : parent);
}

}  // namespace

Result<ModelConfig> ReadHfConfig(const std::string& dir) {
  const std::string path = dir + "/config.json";
  if (!Exists(path)) return Status::DataError(dir + ": no config.json (not a model directory)");
  RL_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto config = ConfigFromString(text);
  if (!config.ok()) return config.status().WithContext(path);
  return config;
}

Result<Transformer> LoadHfModel(const std::string& dir, const HfLoadOptions& options) {
  RL_ASSIGN_OR_RETURN(ModelConfig config, ReadHfConfig(dir));
  if (options.context > 0) config.rl_context = std::min(options.context, config.context());
  RL_ASSIGN_OR_RETURN(auto weight_map, ReadWeightMap(dir));
  std::vector<std::string> files;
  if (weight_map.empty()) files.push_back(kSingle);
  for (const auto& [name, file] : weight_map) {
    if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
  }
  std::sort(files.begin(), files.end());
  RL_RETURN_IF_ERROR(CheckSizes(dir, files, config));
  RL_ASSIGN_OR_RETURN(Transformer model, Transformer::Create(config, 0, options.dtype));
  WeightLoader loader(dir, model, weight_map);
  for (const auto& [name, t] : model.NamedParameters()) {
    if (!weight_map.empty() && weight_map.count(name) == 0) {
      return Status::DataError(dir + "/" + kIndex + ": no entry for tensor '" + name + "'");
    }
  }
  for (const std::string& f : files) RL_RETURN_IF_ERROR(loader.LoadShard(f));
  RL_RETURN_IF_ERROR(loader.CheckComplete());
  return model;
}

Status SaveHfModel(const std::string& dir_arg, const Transformer& model,
                   const HfSaveOptions& options) {
  std::string dir = dir_arg;  // "out/" names "out": the temporary directory goes beside it
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (dir.empty() || dir == "/" || dir == "." || dir == "..") {
    return Status::InvalidArgument("save model: bad directory name \"" + dir_arg + "\"");
  }
  const std::string tmp = dir + ".tmp";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  RL_RETURN_IF_ERROR(MakeDirs(tmp));
  ModelConfig config = model.config();
  config.torch_dtype = options.dtype;
  RL_RETURN_IF_ERROR(WriteFileAtomic(tmp + "/config.json", ConfigToJson(config).dump(2) + "\n"));
  RL_ASSIGN_OR_RETURN(NamedTensors tensors,
                      TorchGuard("save weights", [&]() -> Result<NamedTensors> {
                        NamedTensors out;
                        for (const auto& [name, t] : model.NamedParameters()) {
                          out.emplace_back(name, t.detach().to(ScalarTypeOf(options.dtype)));
                        }
                        return out;
                      }));
  RL_RETURN_IF_ERROR(WriteSafetensorsFile(tmp + "/" + kSingle, tensors, {{"format", "pt"}}));
  RL_RETURN_IF_ERROR(CopyTokenizerFiles(options.tokenizer_from, tmp));
  return Publish(tmp, dir);
}

}  // namespace rl::model
