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

struct ReferenceRun {
  at::Tensor logits;  // [T, V] float64
  at::Tensor routes;  // [T, S, k] int64: the experts each token used per sparse layer (S = 0: dense)
};

// The reference over the model in `dir` for `ids`, replaying `forced` ([T, S, k] integers, -1
// rows route freely) when defined; undefined tensors when the script fails or prints something else.
inline ReferenceRun RunReference(const std::string& dir, const std::vector<int64_t>& ids,
                                 const at::Tensor& forced = {}) {
  std::string cmd = TorchPython() + " " RL_SOURCE_DIR "/tests/reference/hf_reference.py ";
  std::string routes_file;
  if (forced.defined()) {
    routes_file = dir + "/forced_routes.json";
    nlohmann::json j = nlohmann::json::array();
    const at::Tensor f = forced.to(at::kLong).contiguous();
    for (int64_t t = 0; t < f.size(0); ++t) {
      nlohmann::json layers = nlohmann::json::array();
      for (int64_t s = 0; s < f.size(1); ++s) {
        nlohmann::json experts = nlohmann::json::array();
        for (int64_t e = 0; e < f.size(2); ++e) experts.push_back(f[t][s][e].item<int64_t>());
        layers.push_back(experts);
      }
      j.push_back(layers);
    }
    FILE* out = std::fopen(routes_file.c_str(), "w");
    if (out == nullptr) return {};
    const std::string text = j.dump();
    std::fwrite(text.data(), 1, text.size(), out);
    std::fclose(out);
    cmd += "--routes " + routes_file + " ";
  }
  cmd += dir;
  for (int64_t id : ids) cmd += " " + std::to_string(id);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  if (::pclose(pipe) != 0) return {};
  if (!routes_file.empty()) std::remove(routes_file.c_str());
  const nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  if (!j.is_object() || !j.contains("logits") || !j.contains("routes")) return {};
  std::vector<double> flat;
  for (const auto& row : j.at("logits")) {
    for (const auto& v : row) flat.push_back(v.get<double>());
  }
  ReferenceRun run;
  const int64_t t = static_cast<int64_t>(ids.size());
  run.logits = at::tensor(flat, at::kDouble).view({t, -1});
  std::vector<int64_t> routes;
  int64_t layers = 0;
  for (const auto& token : j.at("routes")) {
    layers = static_cast<int64_t>(token.size());
    for (const auto& layer : token) {
      for (const auto& e : layer) routes.push_back(e.get<int64_t>());
    }
  }
  run.routes = layers == 0 ? at::empty({t, 0, 0}, at::kLong) : at::tensor(routes, at::kLong).view({t, layers, -1});
  return run;
}

// The reference's logits [T, V] (float64) for `ids` over the model in `dir`; an undefined
// tensor when the script fails or prints something else.
inline at::Tensor ReferenceLogits(const std::string& dir, const std::vector<int64_t>& ids) {
  return RunReference(dir, ids).logits;
}

}  // namespace rl::model::testing
