#include "rl/train/sft.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>

#include "rl/model/torch_guard.h"
#include "rl/train/adamw.h"
#include "rl/train/evaluate.h"
#include "rl/train/grpo_loss.h"

namespace rl::train {
namespace {

Result<double> SftStep(model::Transformer* model, AdamW* opt, const std::vector<const Sample*>& batch,
                       int64_t pad_id, const SftOptions& o) {
  return model::TorchGuard("sft step", [&]() -> Result<double> {
    TokenBatch tb = MakeTokenBatch(batch, pad_id);
    RL_ASSIGN_OR_RETURN(at::Tensor lp, TokenLogprobs(*model, tb.tokens, tb.mask));
    at::Tensor loss = -(lp * tb.mask).sum() / tb.mask.sum();
    opt->ZeroGrad();
    loss.backward();
    opt->ClipGradNorm(o.grad_clip);
    RL_RETURN_IF_ERROR(opt->Step(o.lr));
    return loss.item<double>();
  });
}

}  // namespace

Result<SftData> EncodeSftData(task::Dataset* data, const model::PromptEncoder& encoder, int64_t context) {
  SftData out;
  for (size_t i = 0; i < data->size(); ++i) {
    RL_ASSIGN_OR_RETURN(task::Example e, data->Read(i));
    const std::string where = data->path() + ":" + std::to_string(e.line);
    Sample s;
    auto prompt = encoder.Prompt(e);
    if (!prompt.ok()) return prompt.status().WithContext(where);
    auto response = encoder.Response(e.response);
    if (!response.ok()) return response.status().WithContext(where);
    if (static_cast<int64_t>(prompt->size() + response->size()) > context) {
      ++out.too_long;
      continue;
    }
    s.prompt_ids = std::move(*prompt);
    s.response_ids = std::move(*response);
    s.logprobs.assign(s.response_ids.size(), 0.0f);
    out.samples.push_back(std::move(s));
  }
  return out;
}

Result<SftResult> RunSft(model::Transformer* model, const SftData& data, int64_t pad_id, const SftEval* eval,
                         const SftOptions& o, const std::function<void(const SftProgress&)>& on_step,
                         const std::atomic<bool>& stop) {
  const std::vector<Sample>& samples = data.samples;
  if (samples.empty()) return Status::DataError("no SFT examples fit the model's context");
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
    RL_ASSIGN_OR_RETURN(p.loss, SftStep(model, &opt, batch, pad_id, o));
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.steps = step;
    result.seconds = p.seconds;
    // Near the target the accuracy climbs several points a step (the jump of the learning curve):
    // evaluating every step from half the target on stops within a step of crossing it.
    bool near_target = result.accuracy >= o.target_accuracy / 2;
    if (eval && (step % o.eval_every == 0 || near_target || step == o.max_steps)) {
      RL_ASSIGN_OR_RETURN(p.accuracy, GreedyAccuracy(*model, *eval->encoder, *eval->set, eval->verifier,
                                                     o.eval_max_new_tokens));
      p.evaluated = result.evaluated = true;
      result.accuracy = p.accuracy;
      result.reached = p.accuracy >= o.target_accuracy;
    }
    if (on_step) on_step(p);
    if (result.reached) break;
  }
  return result;
}

}  // namespace rl::train
