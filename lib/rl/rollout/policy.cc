#include "rl/rollout/policy.h"

#include <dirent.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "rl/core/fs.h"
#include "rl/core/log.h"
#include "rl/model/model_file.h"

namespace rl::rollout {
namespace {

// "weights-<decimal>.safetensors" -> the version; nullopt for any other name.
std::optional<uint64_t> VersionOfName(const std::string& name) {
  static const std::string kPrefix = "weights-", kSuffix = ".safetensors";
  if (name.size() <= kPrefix.size() + kSuffix.size()) return std::nullopt;
  if (name.compare(0, kPrefix.size(), kPrefix) != 0) return std::nullopt;
  if (name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) return std::nullopt;
  std::string digits = name.substr(kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.empty() || digits.size() > 19 || digits.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return std::strtoull(digits.c_str(), nullptr, 10);
}

}  // namespace

std::string WeightsFileName(uint64_t version) { return "weights-" + std::to_string(version) + ".safetensors"; }

Result<std::optional<WeightsFile>> NewestWeights(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return std::optional<WeightsFile>();
    return Status::IOError(ErrnoMessage("opendir", dir));
  }
  std::optional<WeightsFile> best;
  while (struct dirent* e = ::readdir(d)) {
    std::optional<uint64_t> v = VersionOfName(e->d_name);
    if (v && (!best || *v > best->version)) best = WeightsFile{dir + "/" + e->d_name, *v};
  }
  ::closedir(d);
  return best;
}

Status Policy::Take(model::Transformer& model, const std::string& origin) const {
  if (dtype_) RL_RETURN_IF_ERROR(model.ToDType(*dtype_).WithContext(origin));  // on the host: half the copy
  return model.To(device_).WithContext(origin);
}

Status Policy::Load(const std::string& path) {
  RL_ASSIGN_OR_RETURN(model::LoadedModel loaded, model::LoadModelFile(path));
  RL_RETURN_IF_ERROR(Take(loaded.model, path));
  model_ = std::move(loaded.model);
  version_ = loaded.version;
  path_ = path;
  return Status::OK();
}

Result<std::optional<WeightsFile>> Policy::Newer(const std::string& dir) const {
  if (dir.empty()) return std::optional<WeightsFile>();
  RL_ASSIGN_OR_RETURN(std::optional<WeightsFile> newest, NewestWeights(dir));
  if (!newest || (loaded() && newest->version <= std::max(version_, seen_)) || failed_version_ == newest->version) {
    return std::optional<WeightsFile>();
  }
  return newest;
}

bool Policy::Switch(const WeightsFile& file) {
  Status s = Load(file.path);
  if (!s.ok()) {
    failed_version_ = file.version;
    spdlog::error("{}; keeping version {}", s.message(), version_);
    return false;
  }
  seen_ = file.version;
  if (version_ != file.version) {
    spdlog::warn("{} holds rl_version {}; using {}, the version its name gives", file.path, version_, file.version);
    version_ = file.version;
  }
  return true;
}

Status Policy::Use(model::Transformer model, uint64_t version, std::string origin) {
  RL_RETURN_IF_ERROR(Take(model, origin));
  model_ = std::move(model);
  version_ = version;
  path_ = std::move(origin);
  return Status::OK();
}

Result<bool> Policy::Refresh(const std::string& dir) {
  RL_ASSIGN_OR_RETURN(std::optional<WeightsFile> file, Newer(dir));
  return file ? Switch(*file) : false;
}

}  // namespace rl::rollout
