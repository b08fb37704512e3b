#include "rl/train/decode_profile.h"

#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "rl/core/fail.h"
#include "rl/model/generate.h"
#include "rl/model/model_file.h"
#include "rl/model/tokenizer.h"
#include "rl/train/addition_task.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {
namespace {

using Clock = std::chrono::steady_clock;

Result<model::Transformer> ModelFor(const DecodeProfileOptions& o) {
  if (!o.weights.empty()) {
    RL_ASSIGN_OR_RETURN(model::LoadedModel m, model::LoadModelFile(o.weights));
    return m.model;
  }
  return model::Transformer::Create(model::DemoConfig(), o.seed);  // man rl-train
}

Result<DecodeFigure> TimeGenerate(const model::Transformer& m, const std::vector<std::vector<int64_t>>& prompts,
                                  const DecodeProfileOptions& o, bool cache,
                                  std::vector<model::Generation>* out) {
  model::GenerateOptions g;
  g.max_new_tokens = o.max_new_tokens;
  g.slots = o.slots;
  g.seed = o.seed;
  g.use_kv_cache = cache;  // eos_id stays -1: every response runs max_new_tokens
  model::GenerateStats stats;
  auto start = Clock::now();
  RL_ASSIGN_OR_RETURN(*out, model::Generate(m, prompts, g, &stats));
  return DecodeFigure{cache ? "kv-cache" : "no-cache", stats.new_tokens,
                      std::chrono::duration<double>(Clock::now() - start).count()};
}

// One GRPO step over the generated sequences, in groups of 8 with made-up rewards.
Result<DecodeFigure> TimeTrain(const model::Transformer& m, const std::vector<std::vector<int64_t>>& prompts,
                               const std::vector<model::Generation>& gens) {
  RL_ASSIGN_OR_RETURN(model::Transformer copy, m.Clone());
  GrpoOptions go;
  go.pad_id = model::CharTokenizer::kPad;
  RL_ASSIGN_OR_RETURN(std::unique_ptr<GrpoTrainer> trainer, GrpoTrainer::Create(std::move(copy), std::nullopt, go));
  std::vector<Group> groups;
  int64_t tokens = 0;
  for (size_t i = 0; i < gens.size(); ++i) {
    if (i % 8 == 0) groups.push_back({std::to_string(i / 8), {}});
    Sample s;
    s.prompt_ids = prompts[i];
    s.response_ids = gens[i].response_ids;
    s.logprobs = gens[i].logprobs;
    s.reward = static_cast<double>(i % 3 == 0);
    tokens += static_cast<int64_t>(s.prompt_ids.size() + s.response_ids.size());
    groups.back().samples.push_back(std::move(s));
  }
  auto start = Clock::now();
  RL_RETURN_IF_ERROR(trainer->Accumulate(groups));
  RL_RETURN_IF_ERROR(trainer->FinishStep().status());
  return DecodeFigure{"train", tokens, std::chrono::duration<double>(Clock::now() - start).count()};
}

void Print(const std::vector<DecodeFigure>& figures, const DecodeProfileOptions& o) {
  const double base = figures[1].tokens_per_s();
  if (o.json) {
    for (const DecodeFigure& f : figures) {
      std::cout << nlohmann::json({{"path", f.path}, {"tokens", f.tokens}, {"seconds", f.seconds},
                                   {"tokens_per_s", f.tokens_per_s()},
                                   {"vs_no_cache", base > 0 ? f.tokens_per_s() / base : 0.0}}).dump()
                << "\n";
    }
    return;
  }
  std::printf("%-9s %9s %9s %11s %12s\n", "path", "tokens", "seconds", "tokens/s", "vs no-cache");
  for (const DecodeFigure& f : figures) {
    std::printf("%-9s %9lld %9.3f %11.0f %11.2fx\n", f.path.c_str(), static_cast<long long>(f.tokens), f.seconds,
                f.tokens_per_s(), base > 0 ? f.tokens_per_s() / base : 0.0);
  }
  std::printf("(%lld sequences, %lld slots, %lld new tokens each, %d threads; train: forward, backward and "
              "AdamW over prompt and response tokens)\n",
              static_cast<long long>(o.sequences), static_cast<long long>(o.slots),
              static_cast<long long>(o.max_new_tokens), o.threads);
}

}  // namespace

Result<std::vector<DecodeFigure>> MeasureDecode(const DecodeProfileOptions& o) {
  at::set_num_threads(o.threads);
  RL_ASSIGN_OR_RETURN(model::Transformer m, ModelFor(o));
  if (o.max_new_tokens < 1 || o.sequences < 1) return Status::InvalidArgument("nothing to generate");
  model::CharTokenizer tok;
  std::vector<Problem> problems = MakeProblems(static_cast<size_t>(o.sequences), o.seed);
  std::vector<std::vector<int64_t>> prompts;
  for (const Problem& p : problems) {
    RL_ASSIGN_OR_RETURN(std::vector<int64_t> ids, tok.Encode(p.prompt));
    ids.insert(ids.begin(), tok.bos_id());
    if (static_cast<int64_t>(ids.size()) + o.max_new_tokens > m.config().context()) {
      return Status::InvalidArgument("--max-new-tokens does not fit the model's context of " +
                                     std::to_string(m.config().context()));
    }
    prompts.push_back(std::move(ids));
  }
  std::vector<model::Generation> gens, ignored;
  std::vector<DecodeFigure> out;
  RL_ASSIGN_OR_RETURN(DecodeFigure cached, TimeGenerate(m, prompts, o, true, &gens));
  RL_ASSIGN_OR_RETURN(DecodeFigure full, TimeGenerate(m, prompts, o, false, &ignored));
  RL_ASSIGN_OR_RETURN(DecodeFigure train, TimeTrain(m, prompts, gens));
  return std::vector<DecodeFigure>{cached, full, train};
}

profile::Subcommand AddDecodeProfile(CommandLine& cl) {
  auto o = std::make_shared<DecodeProfileOptions>();
  CLI::App* app = cl.Sub("decode",
                         "generation tokens/s with and without the KV cache (the baseline, same run), and "
                         "training tokens/s");
  cl.Bind(app, "--weights", &o->weights);
  cl.Bind(app, "--sequences", &o->sequences)->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  cl.Bind(app, "--slots", &o->slots)->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cl.Bind(app, "--max-new-tokens", &o->max_new_tokens)->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  cl.Bind(app, "--threads", &o->threads)->check(CLI::Range(1, 256));
  cl.Bind(app, "--seed", &o->seed);
  cl.BindFlag(app, "--json", &o->json);
  return {app, [o]() -> int {
            auto figures = MeasureDecode(*o);
            if (!figures.ok()) return Fail("rl-profile", figures.status());
            Print(*figures, *o);
            return kExitOk;
          }};
}

}  // namespace rl::train
