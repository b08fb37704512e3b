// The independent reference of the model families for tests: tests/reference/hf_reference.py
// (python3-torch, written from the architectures' public definitions) run over a Hugging Face
// model directory. Test-only: the including target defines RL_SOURCE_DIR.
#pragma once

#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rl::model::testing {

// The first of $RL_PYTHON, python3 and /usr/bin/python3 (where Debian's python3-torch lives,
// whatever PATH says) that imports torch; empty when none does.
inline const std::string& TorchPython() {
  static const std::string found = [] {
    std::vector<std::string> candidates = {"python3", "/usr/bin/python3"};
    if (const char* env = std::getenv("RL_PYTHON")) candidates.insert(candidates.begin(), env);
    for (const std::string& p : candidates) {
      if (std::system((p + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0) return p;
    }
    return std::string();
  }();
  return found;
}

// The reference's logits [T, V] (float64) for `ids` over the model in `dir`; an undefined
// tensor when the script fails or prints something else.
inline at::Tensor ReferenceLogits(const std::string& dir, const std::vector<int64_t>& ids) {
  std::string cmd = TorchPython() + " " RL_SOURCE_DIR "/tests/reference/hf_reference.py " + dir;
  for (int64_t id : ids) cmd += " " + std::to_string(id);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (::pclose(pipe) != 0) return {};
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object() || !j.contains("logits")) return {};
  std::vector<double> flat;
  for (const auto& row : j.at("logits")) {
    for (const auto& v : row) flat.push_back(v.get<double>());
  }
  return at::tensor(flat, at::kDouble).view({static_cast<int64_t>(ids.size()), -1});
}

}  // namespace rl::model::testing
