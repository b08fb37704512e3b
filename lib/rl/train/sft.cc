#include "rl/train/sft.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "rl/model/tokenizer.h"
#include "rl/model/torch_guard.h"
#include "rl/train/adamw.h"
#include "rl/train/evaluate.h"
#include "rl/train/grpo_loss.h"

namespace rl::train {
namespace {

Result<std::vector<Sample>> Encode(const std::vector<Problem>& data) {
  model::CharTokenizer tok;
  std::vector<Sample> out;
  for (const Problem& p : data) {
    Sample s;
    RL_ASSIGN_OR_RETURN(s.prompt_ids, tok.Encode(p.prompt));
    s.prompt_ids.insert(s.prompt_ids.begin(), tok.bos_id());
    RL_ASSIGN_OR_RETURN(s.response_ids, tok.Encode(p.answer));
    s.response_ids.push_back(tok.eos_id());
    s.logprobs.assign(s.response_ids.size(), 0.0f);
    out.push_back(std::move(s));
  }
  return out;
}

Result<double> SftStep(model::Transformer* model, AdamW* opt, const std::vector<const Sample*>& batch,
                       const SftOptions& o) {
  return model::TorchGuard("sft step", [&]() -> Result<double> {
    TokenBatch tb = MakeTokenBatch(batch, model::CharTokenizer::kPad);
    RL_ASSIGN_OR_RETURN(at::Tensor lp, TokenLogprobs(*model, tb.tokens));
    at::Tensor loss = -(lp * tb.mask).sum() / tb.mask.sum();
    opt->ZeroGrad();
    loss.backward();
    opt->ClipGradNorm(o.grad_clip);
    RL_RETURN_IF_ERROR(opt->Step(o.lr));
    return loss.item<double>();
  });
}

}  // namespace

Result<SftResult> RunSft(model::Transformer* model, const std::vector<Problem>& data, const SftOptions& o,
                         const std::function<void(const SftProgress&)>& on_step,
                         const std::atomic<bool>& stop) {
  if (data.empty()) return Status::DataError("no SFT data");
  RL_ASSIGN_OR_RETURN(std::vector<Sample> samples, Encode(data));
  std::vector<Problem> held_out = HeldOutSet(static_cast<size_t>(o.eval_size));
  AdamW opt(model->NamedParameters(), o.adamw);
  std::mt19937_64 gen(o.seed);
  std::vector<size_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  size_t next = order.size();
  auto start = std::chrono::steady_clock::now();
  SftResult result;
  for (int64_t step = 1; step <= o.max_steps && !stop; ++step) {
    std::vector<const Sample*> batch;
    while (static_cast<int64_t>(batch.size()) < o.batch_size) {
      if (next == order.size()) {
        std::shuffle(order.begin(), order.end(), gen);
        next = 0;
      }
      batch.push_back(&samples[order[next++]]);
    }
    SftProgress p;
    p.step = step;
    RL_ASSIGN_OR_RETURN(p.loss, SftStep(model, &opt, batch, o));
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.steps = step;
    result.seconds = p.seconds;
    // Near the target the accuracy climbs several points a step (the jump of the learning curve):
    // evaluating every step from half the target on stops within a step of crossing it.
    bool near_target = result.accuracy >= o.target_accuracy / 2;
    if (step % o.eval_every == 0 || near_target || step == o.max_steps) {
      RL_ASSIGN_OR_RETURN(p.accuracy, GreedyAccuracy(*model, held_out));
      p.evaluated = true;
      result.accuracy = p.accuracy;
      result.reached = p.accuracy >= o.target_accuracy;
    }
    if (on_step) on_step(p);
    if (result.reached) break;
  }
  return result;
}

}  // namespace rl::train
