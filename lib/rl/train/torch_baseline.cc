#include "rl/train/torch_baseline.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

namespace rl::train {
namespace {

#ifndef RL_REFERENCE_DIR
#define RL_REFERENCE_DIR ""
#endif

// Single-quoted for sh.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool ImportsTorch(const std::string& python) {
  const int rc = std::system((Quote(python) + " -c 'import torch' >/dev/null 2>&1").c_str());
  return rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
}

}  // namespace

Result<std::string> TorchPython() {
  if (const char* env = std::getenv("RL_PYTHON"); env != nullptr && *env != '\0') {
    if (ImportsTorch(env)) return std::string(env);
    return Status::Unavailable(std::string("RL_PYTHON=") + env + " does not import torch");
  }
  for (const char* p : {"python3", "/usr/bin/python3"}) {
    if (ImportsTorch(p)) return std::string(p);
  }
  return Status::Unavailable("no python3 with torch (install python3-torch)");
}

Result<std::vector<nlohmann::json>> RunTorchBaseline(const std::string& model_dir, const nlohmann::json& spec,
                                                     const std::string& work_dir) {
  RL_ASSIGN_OR_RETURN(std::string python, TorchPython());
  const std::string script = std::string(RL_REFERENCE_DIR) + "/decode_reference.py";
  if (::access(script.c_str(), R_OK) != 0) return Status::Unavailable(script + " is missing");
  const std::string spec_file = work_dir + "/spec.json";
  {
    std::ofstream out(spec_file);
    out << spec.dump();
    if (!out.flush()) return Status::IOError("cannot write " + spec_file);
  }
  const std::string cmd = Quote(python) + " " + Quote(script) + " " + Quote(model_dir) + " " + Quote(spec_file);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return Status::Internal("cannot start " + python);
  std::vector<nlohmann::json> out;
  std::string line;
  bool bad = false;
  for (int c; (c = std::fgetc(pipe)) != EOF;) {
    if (c != '\n') {
      line += static_cast<char>(c);
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) bad = true;
    else out.push_back(std::move(j));
    line.clear();
  }
  const int rc = ::pclose(pipe);
  if (rc != 0) return Status::Internal("the torch baseline (" + script + ") failed; its error is above");
  if (bad || !line.empty()) return Status::Internal("the torch baseline printed a line that is not a JSON object");
  return out;
}

}  // namespace rl::train
