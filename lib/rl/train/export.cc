#include "rl/train/export.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "rl/core/fs.h"
#include "rl/model/hf_dir.h"
#include "rl/model/safetensors.h"
#include "rl/train/checkpoint.h"

namespace rl::train {

namespace fs = std::filesystem;

namespace {

constexpr char kCheckpointFormat[] = "roleflow-train-1";  // checkpoint.h

Result<model::LoadedModel> FromCheckpoint(const std::string& bytes) {
  RL_ASSIGN_OR_RETURN(Checkpoint c, DecodeCheckpoint(bytes));
  if (!c.model) return Status::Corruption("checkpoint holds no model");
  return model::LoadedModel{std::move(*c.model), c.version};
}

// Whether the bytes are a trainer checkpoint rather than a model file (their tensors are decoded
// here only to read the metadata, and freed on return).
Result<bool> IsCheckpoint(const std::string& bytes, const std::string& path) {
  auto st = model::DecodeSafetensors(bytes);
  if (!st.ok()) return st.status().WithContext(path);
  return st->metadata["rl_format"] == kCheckpointFormat;
}

// Refuses an `out` that must not be replaced: anything but a missing path, an empty directory or
// an HF directory (one with config.json, presumably an earlier export).
Status CheckOut(const std::string& out) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(out, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) return Status::IOError(out + ": " + ec.message());
  if (!fs::exists(st)) return Status::OK();
  if (!fs::is_directory(st)) return Status::IOError(out + ": exists and is not a directory");
  const bool empty = fs::is_empty(out, ec);
  if (ec) return Status::IOError(out + ": " + ec.message());
  if (!empty && !fs::exists(fs::path(out) / "config.json", ec))
    return Status::IOError(out + ": a non-empty directory without config.json; not replaced");
  return Status::OK();
}

Status CheckTokenizerFrom(const std::string& dir) {
  if (dir.empty()) return Status::OK();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return Status::NotFound("--tokenizer-from " + dir + ": no such directory");
  if (!fs::exists(fs::path(dir) / "tokenizer.json", ec) && !fs::exists(fs::path(dir) / "tokenizer.model", ec))
    return Status::NotFound("--tokenizer-from " + dir + ": no tokenizer.json or tokenizer.model there");
  return Status::OK();
}

Result<std::vector<std::string>> ListNames(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  if (ec) return Status::IOError(dir + ": " + ec.message());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

Result<model::LoadedModel> LoadAnyModelFile(const std::string& path) {
  RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  RL_ASSIGN_OR_RETURN(bool checkpoint, IsCheckpoint(bytes, path));
  auto loaded = checkpoint ? FromCheckpoint(bytes) : model::DecodeModel(bytes);
  if (!loaded.ok()) return loaded.status().WithContext(path);
  return loaded;
}

Status CheckExportTargets(const ExportOptions& options) {
  RL_RETURN_IF_ERROR(CheckOut(options.out));
  return CheckTokenizerFrom(options.tokenizer_from);
}

Result<ExportReport> ExportHfDir(const model::LoadedModel& loaded, const ExportOptions& options) {
  RL_RETURN_IF_ERROR(CheckExportTargets(options));
  model::HfSaveOptions save;
  save.dtype = options.dtype.value_or(loaded.model.dtype());
  save.tokenizer_from = options.tokenizer_from;
  RL_RETURN_IF_ERROR(model::SaveHfModel(options.out, loaded.model, save));
  ExportReport r;
  r.version = loaded.version;
  r.dtype = save.dtype;
  for (const at::Tensor& p : loaded.model.Parameters()) r.parameters += p.numel();
  RL_ASSIGN_OR_RETURN(r.files, ListNames(options.out));
  return r;
}

}  // namespace rl::train
