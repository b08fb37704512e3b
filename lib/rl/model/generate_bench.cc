// rl_model_bench: generation throughput with and without the KV cache.
//
//   rl_model_bench [layers d_model heads context slots prompts threads]
// defaults: 3 128 4 32 64 256 1. Random weights, demo-task prompts ("<bos>12+34="), eos off so
// every sequence runs to the context. Prints one JSON line per path to stdout:
//   {"path":"kv_cache","new_tokens":N,"seconds":S,"tokens_per_s":R,"steps":K,"forward_calls":F}
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "rl/model/generate.h"
#include "rl/model/tokenizer.h"

namespace {

int64_t Arg(int argc, char** argv, int i, int64_t fallback) {
  return argc > i ? std::strtoll(argv[i], nullptr, 10) : fallback;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rl::model;
  ModelConfig c;
  c.vocab_size = CharTokenizer().vocab_size();
  c.n_layers = Arg(argc, argv, 1, 3);
  c.d_model = Arg(argc, argv, 2, 128);
  c.n_heads = Arg(argc, argv, 3, 4);
  c.context = Arg(argc, argv, 4, 32);
  c.positions = Positions::kRotary;
  const int64_t slots = Arg(argc, argv, 5, 64), n_prompts = Arg(argc, argv, 6, 256);
  at::set_num_threads(static_cast<int>(Arg(argc, argv, 7, 1)));
  auto model = Transformer::Create(c, 1);
  if (!model.ok()) {
    std::fprintf(stderr, "rl_model_bench: %s\n", model.status().ToString().c_str());
    return 78;
  }
  CharTokenizer tok;
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < n_prompts; ++i) {
    auto ids = tok.Encode(std::to_string(i % 100) + "+" + std::to_string((i * 7) % 100) + "=");
    ids->insert(ids->begin(), tok.bos_id());
    prompts.push_back(*ids);
  }
  for (bool cache : {true, false}) {
    GenerateOptions o;
    o.max_new_tokens = c.context;
    o.slots = slots;
    o.seed = 1;
    o.use_kv_cache = cache;
    GenerateStats stats;
    const auto start = std::chrono::steady_clock::now();
    auto gens = Generate(*model, prompts, o, &stats);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!gens.ok()) {
      std::fprintf(stderr, "rl_model_bench: %s\n", gens.status().ToString().c_str());
      return 70;
    }
    std::printf(
        "{\"path\":\"%s\",\"new_tokens\":%lld,\"seconds\":%.3f,\"tokens_per_s\":%.0f,"
        "\"steps\":%lld,\"forward_calls\":%lld}\n",
        cache ? "kv_cache" : "full_forward", static_cast<long long>(stats.new_tokens), seconds,
        static_cast<double>(stats.new_tokens) / seconds, static_cast<long long>(stats.steps),
        static_cast<long long>(stats.forward_calls));
  }
  return 0;
}
