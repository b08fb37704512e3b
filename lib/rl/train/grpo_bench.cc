// rl_grpo_bench: GRPO on the demo task in one process (generate, score, train, no queue), the
// upper bound for what the pipeline can learn per step and per second. It separates "does the
// algorithm learn" from "does the pipeline keep it fed", and prints generation and training
// tokens/s.
//
//   rl_grpo_bench model=DIR [key=value ...]
// model: a Hugging Face model directory over the demo's tokenizer (share/models/addition-tiny, or
// one trained by rl-train sft and exported); its weights, else a random model from seed.
// weights=FILE: a roleflow model file instead of the directory's weights. Prompts and answers are
// encoded by model::PromptEncoder (no chat template), as rl-train's feeder does.
// keys (defaults): steps=200 lr=1e-4 prompts=64 group=8 seed=1 threads=1 eval_every=10
//   eval_size=256 dynamic=0 (drop groups whose rewards are all equal, draw more prompts)
//   stale=0 (1: sample with the weights of the step before, as async mode does)
//   clip=0.2 norm=token|sequence slots=64 warmup=0 grad_clip=1 minibatches=1 epochs=1
//   (GrpoOptions: minibatches x epochs updates per batch)
//   eps=1e-8 beta2=0.999 kl=0 (KL coefficient to the starting model)
//   sft_warm=0 sft_lr=1e-5 (supervised steps first, to calibrate Adam's moments)
//   device=cpu (cpu, cuda or cuda:N: the policy, its reference, generation and the step there;
//   batches are built on the host and move at the model's door, as in the roles)
// One JSON line per step on stdout: step, reward, accuracy (when evaluated), gen_s, train_s,
// gen_tokens_per_s, train_tokens_per_s, clip_fraction, grad_norm, and dlogp_pos / dlogp_neg:
// how the step moved the summed log-probability of the sequences it meant to push up / down.
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "rl/model/device.h"
#include "rl/model/generate.h"
#include "rl/train/advantage.h"
#include "rl/model/model_dir.h"
#include "rl/model/model_file.h"
#include "rl/model/prompt_encoder.h"
#include "rl/task/addition.h"
#include "rl/train/grpo_trainer.h"
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// sysexits as the tools have them: 64 usage, 69 a device this build or machine lacks, else 70.
int Die(const rl::Status& s) {
  std::fprintf(stderr, "rl_grpo_bench: %s\n", s.ToString().c_str());
  if (s.code() == rl::Code::kInvalidArgument) return 64;
  return s.code() == rl::Code::kUnavailable ? 69 : 70;
}

// A problem as the model sees it: prompt ids, and the response that scores (answer ids, <eos>).
struct Encoded {
  std::vector<int64_t> prompt, response;
};

rl::Result<Encoded> Encode(const rl::model::PromptEncoder& enc, const rl::task::Problem& p) {
  rl::task::Example e;
  e.prompt = p.prompt;
  Encoded out;
  RL_ASSIGN_OR_RETURN(out.prompt, enc.Prompt(e));
  RL_ASSIGN_OR_RETURN(out.response, enc.Response(p.answer));
  return out;
}

// The fraction of problems whose greedy response is exactly the answer followed by <eos>.
rl::Result<double> GreedyAccuracy(const rl::model::Transformer& m, const rl::model::PromptEncoder& enc,
                                  const std::vector<rl::task::Problem>& problems) {
  std::vector<std::vector<int64_t>> prompts, want;
  for (const auto& p : problems) {
    RL_ASSIGN_OR_RETURN(Encoded x, Encode(enc, p));
    prompts.push_back(std::move(x.prompt));
    want.push_back(std::move(x.response));
  }
  rl::model::GenerateOptions o;
  o.max_new_tokens = 6;
  o.sampling.temperature = 0;
  o.slots = 64;
  o.eos_id = enc.dir().eos_id;
  RL_ASSIGN_OR_RETURN(std::vector<rl::model::Generation> gens, rl::model::Generate(m, prompts, o));
  size_t correct = 0;
  for (size_t i = 0; i < gens.size(); ++i) correct += gens[i].response_ids == want[i];
  return problems.empty() ? 0.0 : static_cast<double>(correct) / static_cast<double>(problems.size());
}

rl::Result<rl::model::Transformer> StartModel(const rl::model::ModelDir& dir, const std::string& weights,
                                              uint64_t seed) {
  if (weights.empty()) return rl::model::InitialModel(dir, seed);
  RL_ASSIGN_OR_RETURN(rl::model::LoadedModel m, rl::model::LoadModelFile(weights));
  return m.model;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace rl;
  std::map<std::string, std::string> kv = {{"model", ""}, {"weights", ""}, {"steps", "200"}, {"lr", "1e-4"},      {"prompts", "64"},
                                           {"group", "8"},   {"seed", "1"},       {"threads", "1"},
                                           {"eval_every", "10"}, {"eval_size", "256"}, {"dynamic", "0"},
                                           {"stale", "0"},   {"clip", "0.2"},     {"norm", "token"},
                                           {"slots", "64"}, {"warmup", "0"}, {"epochs", "1"}, {"minibatches", "1"}, {"eps", "1e-8"}, {"beta2", "0.999"}, {"kl", "0"}, {"sft_warm", "0"}, {"sft_lr", "1e-5"}, {"grad_clip", "1"}, {"device", "cpu"}};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto eq = a.find('=');
    if (eq == std::string::npos || !kv.count(a.substr(0, eq))) {
      std::fprintf(stderr, "rl_grpo_bench: unknown argument %s\n", argv[i]);
      return 64;
    }
    kv[a.substr(0, eq)] = a.substr(eq + 1);
  }
  if (kv["model"].empty()) {
    std::fprintf(stderr, "usage: rl_grpo_bench model=DIR [weights=FILE] [key=value ...]\n");
    return 64;
  }
  auto num = [&](const char* k) { return std::stod(kv[k]); };
  at::set_num_threads(static_cast<int>(num("threads")));
  auto dir = model::OpenModelDir(kv["model"]);
  if (!dir.ok()) return Die(dir.status());
  auto encoder = model::PromptEncoder::Create(*dir, "none");
  if (!encoder.ok()) return Die(encoder.status());
  auto loaded = StartModel(*dir, kv["weights"], static_cast<uint64_t>(num("seed")));
  if (!loaded.ok()) return Die(loaded.status());
  auto device = model::OpenDevice(kv["device"]);
  if (!device.ok()) return Die(device.status());
  if (Status s = loaded->To(*device); !s.ok()) return Die(s);
  train::GrpoOptions go;
  go.schedule.lr = num("lr");
  go.clip = num("clip");
  go.schedule.warmup_steps = static_cast<int64_t>(num("warmup"));
  go.grad_clip = num("grad_clip");
  go.adamw.eps = num("eps");
  go.adamw.beta2 = num("beta2");
  auto norm = train::ParseLossNorm(kv["norm"]);
  if (!norm.ok()) return Die(norm.status());
  go.norm = *norm;
  go.epochs = static_cast<int64_t>(num("epochs"));
  go.minibatches = static_cast<int64_t>(num("minibatches"));
  go.pad_id = dir->pad_id;
  go.kl_coef = num("kl");
  std::optional<model::Transformer> reference;
  if (go.kl_coef > 0) reference = *loaded->Clone();
  auto trainer = train::GrpoTrainer::Create(*loaded, reference, go);
  if (!trainer.ok()) return Die(trainer.status());
  auto sampler_model = (*trainer)->policy().Clone();  // the weights generation uses when stale=1
  if (!sampler_model.ok()) return Die(sampler_model.status());

  const int64_t prompts = static_cast<int64_t>(num("prompts")), group = static_cast<int64_t>(num("group"));
  std::vector<task::Problem> pool = task::MakeProblems(200000, static_cast<uint64_t>(num("seed")) + 1000);
  std::vector<task::Problem> held_out = task::HeldOutSet(static_cast<size_t>(num("eval_size")));
  size_t next = 0;
  model::GenerateOptions gen;
  gen.max_new_tokens = 6;
  gen.slots = static_cast<int64_t>(num("slots"));
  gen.eos_id = dir->eos_id;
  const bool dynamic = num("dynamic") != 0, stale = num("stale") != 0;
  // Optional: calibrate Adam's moments with supervised steps first (as if the optimizer of the
  // warm start carried on into RL).
  for (int64_t k = 0; k < static_cast<int64_t>(num("sft_warm")); ++k) {
    std::vector<train::Sample> sft(256);
    std::vector<const train::Sample*> ptrs;
    for (auto& x : sft) {
      auto enc = Encode(*encoder, pool[next++ % pool.size()]);
      if (!enc.ok()) return Die(enc.status());
      x.prompt_ids = enc->prompt;
      x.response_ids = enc->response;
      x.logprobs.assign(x.response_ids.size(), 0.0f);
      ptrs.push_back(&x);
    }
    train::TokenBatch tb = train::MakeTokenBatch(ptrs, go.pad_id);
    auto lp = train::TokenLogprobs((*trainer)->policy(), tb.tokens);
    const at::Tensor mask = tb.mask.to(lp->device());
    at::Tensor loss = -(*lp * mask).sum() / mask.sum();
    (*trainer)->optimizer().ZeroGrad();
    loss.backward();
    (*trainer)->optimizer().ClipGradNorm(1.0);
    (void)(*trainer)->optimizer().Step(num("sft_lr"));
  }
  (*trainer)->BeginStep();
  auto acc0 = GreedyAccuracy((*trainer)->policy(), *encoder, held_out);
  std::printf("%s\n", nlohmann::json({{"step", 0}, {"accuracy", acc0.ok() ? *acc0 : -1}}).dump().c_str());
  const auto start = Clock::now();
  for (int64_t step = 1; step <= static_cast<int64_t>(num("steps")); ++step) {
    std::vector<train::Group> groups;
    double gen_s = 0, gen_tokens = 0, reward_sum = 0, rewarded = 0;
    while (static_cast<int64_t>(groups.size()) < prompts) {
      std::vector<std::vector<int64_t>> batch;
      std::vector<std::vector<int64_t>> answers;
      int64_t want = prompts - static_cast<int64_t>(groups.size());
      for (int64_t p = 0; p < want; ++p) {
        auto enc = Encode(*encoder, pool[next++ % pool.size()]);
        if (!enc.ok()) return Die(enc.status());
        for (int64_t g = 0; g < group; ++g) batch.push_back(enc->prompt);
        answers.push_back(enc->response);
      }
      gen.seed = static_cast<uint64_t>(step * 7919 + next);
      auto t0 = Clock::now();
      const model::Transformer& sampler = stale ? *sampler_model : (*trainer)->policy();
      auto gens = model::Generate(sampler, batch, gen);
      gen_s += Since(t0);
      if (!gens.ok()) return Die(gens.status());
      for (int64_t p = 0; p < want; ++p) {
        train::Group g;
        g.key = std::to_string(next) + ":" + std::to_string(p);
        bool all_same = true;
        for (int64_t j = 0; j < group; ++j) {
          const model::Generation& x = (*gens)[p * group + j];
          train::Sample s;
          s.prompt_ids = batch[p * group + j];
          s.response_ids = x.response_ids;
          s.logprobs = x.logprobs;
          s.reward = x.response_ids == answers[p] ? 1.0 : 0.0;
          gen_tokens += static_cast<double>(x.response_ids.size());
          reward_sum += s.reward;
          rewarded += 1;
          if (j > 0 && s.reward != g.samples[0].reward) all_same = false;
          g.samples.push_back(std::move(s));
        }
        if (!dynamic || !all_same) groups.push_back(std::move(g));
      }
    }
    if (stale) {
      auto c = (*trainer)->policy().Clone();
      if (!c.ok()) return Die(c.status());
      *sampler_model = std::move(*c);
    }
    auto t1 = Clock::now();
    if (Status s = (*trainer)->Accumulate(groups); !s.ok()) return Die(s);
    Result<train::StepStats> stats = (*trainer)->FinishStep();
    if (!stats.ok()) return Die(stats.status());
    model::Synchronize(*device);  // the step's queued kernels are part of its time
    double train_s = Since(t1);
    double up_pos = 0, up_neg = 0, n_pos = 0, n_neg = 0;
    {  // how the step moved the log-probability of the sequences it pushed up and down
      c10::NoGradGuard ng;
      std::vector<const train::Sample*> all;
      std::vector<double> adv;
      for (const auto& g : groups) {
        std::vector<double> r;
        for (const auto& x : g.samples) r.push_back(x.reward);
        auto a = train::GroupAdvantages(r);
        for (size_t i = 0; i < g.samples.size(); ++i) { all.push_back(&g.samples[i]); adv.push_back(a[i]); }
      }
      train::TokenBatch tb = train::MakeTokenBatch(all, go.pad_id);
      auto lp = train::TokenLogprobs((*trainer)->policy(), tb.tokens);
      at::Tensor d = ((*lp - tb.old_lp.to(lp->device())) * tb.mask.to(lp->device())).sum(1).cpu();
      auto acc = d.accessor<float, 1>();
      for (size_t i = 0; i < all.size(); ++i) {
        if (adv[i] > 0) { up_pos += acc[i]; n_pos++; }
        if (adv[i] < 0) { up_neg += acc[i]; n_neg++; }
      }
    }
    nlohmann::json line = {{"step", step},
                           {"reward", reward_sum / rewarded},
                           {"gen_s", gen_s},
                           {"train_s", train_s},
                           {"elapsed_s", Since(start)},
                           {"gen_tokens_per_s", gen_tokens / gen_s},
                           {"train_tokens_per_s", static_cast<double>(stats->tokens) / train_s},
                           {"clip_fraction", stats->clip_fraction},
                           {"grad_norm", stats->grad_norm},
                           {"samples", stats->samples},
                           {"dlogp_pos", n_pos ? up_pos / n_pos : 0},
                           {"dlogp_neg", n_neg ? up_neg / n_neg : 0}};
    if (step % static_cast<int64_t>(num("eval_every")) == 0) {
      auto acc = GreedyAccuracy((*trainer)->policy(), *encoder, held_out);
      line["accuracy"] = acc.ok() ? *acc : -1;
    }
    std::printf("%s\n", line.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}
