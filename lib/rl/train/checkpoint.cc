#include "rl/train/checkpoint.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "rl/core/fs.h"
#include "rl/model/model_file.h"
#include "rl/model/safetensors.h"

namespace rl::train {
namespace {

constexpr char kFormat[] = "roleflow-train-1";

Result<uint64_t> ParseU64(const model::Metadata& m, const std::string& key) {
  auto it = m.find(key);
  if (it == m.end()) return Status::Corruption("checkpoint lacks '" + key + "'");
  try {
    size_t used = 0;
    uint64_t v = std::stoull(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  return Status::Corruption("checkpoint has a bad '" + key + "'");
}

// The policy computes in the dtype its tensors were saved in (Transformer::dtype()), as
// model_file.h's DecodeModel does: a bf16 policy resumes as bf16, not as f32.
model::DType DTypeOfWeights(const model::NamedTensors& weights) {
  if (weights.empty()) return model::DType::kF32;
  const at::ScalarType t = weights.front().second.scalar_type();
  if (t == at::kBFloat16) return model::DType::kBF16;
  return t == at::kHalf ? model::DType::kF16 : model::DType::kF32;
}

}  // namespace

std::string CheckpointPath(const std::string& dir, int64_t step) {
  char name[48];
  std::snprintf(name, sizeof name, "/ckpt-%08lld.safetensors", static_cast<long long>(step));
  return dir + name;
}

std::string WeightsPath(const std::string& dir, uint64_t version) {
  return dir + "/weights-" + std::to_string(version) + ".safetensors";
}

std::vector<int64_t> ListCheckpoints(const std::string& dir) {
  std::vector<int64_t> out;
  for (uint64_t s : NumberedFiles(dir, "ckpt-", ".safetensors")) out.push_back(static_cast<int64_t>(s));
  return out;
}

Result<std::string> EncodeCheckpoint(const Checkpoint& c) {
  if (!c.model) return Status::InvalidArgument("checkpoint without a model");
  model::NamedTensors tensors;
  for (const auto& [name, t] : c.model->NamedParameters()) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : c.adam) tensors.emplace_back("adam." + name, t);
  for (const auto& [name, t] : c.critic) tensors.emplace_back("critic." + name, t);
  for (const auto& [name, t] : c.critic_adam) tensors.emplace_back("critic_adam." + name, t);
  nlohmann::json consumed = c.consumed;
  model::Metadata meta = {{"rl_format", kFormat},
                          {"rl_config", model::ConfigToString(c.model->config())},
                          {"step", std::to_string(c.step)},
                          {"version", std::to_string(c.version)},
                          {"adam_steps", std::to_string(c.adam_steps)},
                          {"cursor", std::to_string(c.cursor)},
                          {"rng", c.rng},
                          {"consumed", consumed.dump()},
                          {"extra", c.extra.dump()}};
  if (!c.critic.empty()) meta["critic_adam_steps"] = std::to_string(c.critic_adam_steps);
  return model::EncodeSafetensors(tensors, meta);
}

Result<Checkpoint> DecodeCheckpoint(const std::string& bytes) {
  RL_ASSIGN_OR_RETURN(model::SafetensorsContents st, model::DecodeSafetensors(bytes));
  auto& m = st.metadata;
  if (m["rl_format"] != kFormat) return Status::Corruption("not a roleflow trainer checkpoint");
  RL_ASSIGN_OR_RETURN(model::ModelConfig config, model::ConfigFromString(m["rl_config"]));
  Checkpoint c;
  RL_ASSIGN_OR_RETURN(uint64_t step, ParseU64(m, "step"));
  RL_ASSIGN_OR_RETURN(c.version, ParseU64(m, "version"));
  RL_ASSIGN_OR_RETURN(uint64_t adam_steps, ParseU64(m, "adam_steps"));
  RL_ASSIGN_OR_RETURN(c.cursor, ParseU64(m, "cursor"));
  c.step = static_cast<int64_t>(step);
  c.adam_steps = static_cast<int64_t>(adam_steps);
  c.rng = m["rng"];
  auto consumed = nlohmann::json::parse(m["consumed"], nullptr, false);
  auto extra = nlohmann::json::parse(m["extra"], nullptr, false);
  if (!consumed.is_array() || !extra.is_object()) return Status::Corruption("checkpoint has bad JSON metadata");
  for (const auto& i : consumed) {
    if (!i.is_number_unsigned()) return Status::Corruption("checkpoint has a bad consumed list");
    c.consumed.push_back(i.get<uint64_t>());
  }
  c.extra = std::move(extra);
  if (m.count("critic_adam_steps")) {
    RL_ASSIGN_OR_RETURN(uint64_t critic_steps, ParseU64(m, "critic_adam_steps"));
    c.critic_adam_steps = static_cast<int64_t>(critic_steps);
  }
  model::NamedTensors weights;
  for (auto& [name, t] : st.tensors) {
    if (name.rfind("model.", 0) == 0) weights.emplace_back(name.substr(6), t);
    else if (name.rfind("adam.", 0) == 0) c.adam.emplace_back(name.substr(5), t);
    else if (name.rfind("critic.", 0) == 0) c.critic.emplace_back(name.substr(7), t);
    else if (name.rfind("critic_adam.", 0) == 0) c.critic_adam.emplace_back(name.substr(12), t);
    else return Status::Corruption("checkpoint has an unknown tensor '" + name + "'");
  }
  RL_RETURN_IF_ERROR(model::CheckParameterCount(config, weights, "checkpoint"));
  RL_ASSIGN_OR_RETURN(model::Transformer net, model::Transformer::Create(config, 0, DTypeOfWeights(weights)));
  RL_RETURN_IF_ERROR(net.LoadNamedParameters(weights));
  c.model = std::move(net);
  return c;
}

Result<std::optional<Checkpoint>> LoadNewestCheckpoint(const std::string& dir) {
  std::vector<int64_t> steps = ListCheckpoints(dir);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    std::string path = CheckpointPath(dir, *it);
    auto bytes = ReadFile(path);
    if (!bytes.ok()) return bytes.status();
    auto c = DecodeCheckpoint(*bytes);
    if (c.ok()) return std::optional<Checkpoint>(std::move(*c));
    spdlog::warn("skipping checkpoint {}: {}", path, c.status().ToString());
  }
  return std::optional<Checkpoint>();
}

CheckpointWriter::CheckpointWriter(std::string dir, int keep, After after)
    : dir_(std::move(dir)), keep_(std::max(1, keep)), after_(std::move(after)) {
  thread_ = std::thread([this] { Run(); });
}

CheckpointWriter::~CheckpointWriter() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !job_ && !busy_; });
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CheckpointWriter::Submit(Checkpoint c) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !job_ && !busy_; });
  job_ = std::move(c);
  cv_.notify_all();
}

Status CheckpointWriter::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !job_ && !busy_; });
  return last_;
}

void CheckpointWriter::Run() {
  for (;;) {
    Checkpoint c;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return job_.has_value() || quit_; });
      if (!job_) return;
      c = std::move(*job_);
      job_.reset();
      busy_ = true;
    }
    auto start = std::chrono::steady_clock::now();
    Status s = Write(c);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (after_) after_(c, s);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      last_ = s;
      last_seconds_ = seconds;
    }
    cv_.notify_all();
  }
}

Status CheckpointWriter::Write(const Checkpoint& c) {
  RL_ASSIGN_OR_RETURN(std::string bytes, EncodeCheckpoint(c));
  RL_RETURN_IF_ERROR(WriteFileAtomic(CheckpointPath(dir_, c.step), bytes));
  RL_RETURN_IF_ERROR(model::SaveModelFile(WeightsPath(dir_, c.version), *c.model, c.version));
  Prune();
  return Status::OK();
}

void CheckpointWriter::Prune() const {
  std::error_code ec;
  std::vector<int64_t> steps = ListCheckpoints(dir_);
  for (size_t i = 0; i + keep_ < steps.size(); ++i) std::filesystem::remove(CheckpointPath(dir_, steps[i]), ec);
  std::vector<uint64_t> versions = NumberedFiles(dir_, "weights-", ".safetensors");
  for (size_t i = 0; i + keep_ < versions.size(); ++i) {
    if (versions[i] != 0) std::filesystem::remove(WeightsPath(dir_, versions[i]), ec);
  }
}

}  // namespace rl::train
