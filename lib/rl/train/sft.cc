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
                       int64_t pad_id, double lr, double grad_clip) {
  return model::TorchGuard("sft step", [&]() -> Result<double> {
    TokenBatch tb = MakeTokenBatch(batch, pad_id);
    const at::Tensor mask = tb.mask.to(model->device());
    RL_ASSIGN_OR_RETURN(at::Tensor lp, TokenLogprobs(*model, tb.tokens, mask));
    at::Tensor loss = -(lp * mask).sum() / mask.sum();
    opt->ZeroGrad();
    loss.backward();
    opt->ClipGradNorm(grad_clip);
    RL_RETURN_IF_ERROR(opt->Step(lr));
    return loss.item<double>();
  });
}

}  // namespace

std::vector<int64_t> ToolResultMask(const std::vector<int64_t>& ids, const ToolResultTags& tags) {
  auto at = [&](size_t i, const std::vector<int64_t>& tag) {
    return !tag.empty() && i + tag.size() <= ids.size() && std::equal(tag.begin(), tag.end(), ids.begin() + i);
  };
  std::vector<int64_t> mask(ids.size(), 1);
  for (size_t i = 0; i < ids.size();) {
    if (!at(i, tags.open)) {
      ++i;
      continue;
    }
    size_t j = i + tags.open.size();
    while (j < ids.size() && !at(j, tags.close)) ++j;
    j = std::min(ids.size(), j + tags.close.size());
    std::fill(mask.begin() + i, mask.begin() + j, 0);
    i = j;
  }
  return mask;
}

task::DatasetOptions SftRecordOptions(task::DatasetOptions o, const std::string& response_key,
                                      bool response_key_given) {
  o.answer_key = "";
  o.require_response = true;
  o.response_key = response_key_given || o.messages_key.empty() ? response_key : "";
  return o;
}

Result<SftData> EncodeSftData(task::Dataset* data, const model::PromptEncoder& encoder, int64_t context,
                              const ToolResultTags* tool_result) {
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
    if (tool_result) s.loss_mask = ToolResultMask(s.response_ids, *tool_result);
    out.samples.push_back(std::move(s));
  }
  return out;
}

// The steps of RunSft, with its optimizer.
static Result<SftResult> SftLoop(model::Transformer* model, AdamW* opt, const std::vector<Sample>& samples,
                                 int64_t pad_id, const SftEval* eval, const SftOptions& o, const LrSchedule& schedule,
                                 const std::function<void(const SftProgress&)>& on_step, const std::atomic<bool>& stop);

Result<SftResult> RunSft(model::Transformer* model, const SftData& data, int64_t pad_id, const SftEval* eval,
                         const SftOptions& o, const std::function<void(const SftProgress&)>& on_step,
                         const std::atomic<bool>& stop) {
  const std::vector<Sample>& samples = data.samples;
  if (samples.empty()) return Status::DataError("no SFT examples fit the model's context");
  LrSchedule schedule = o.schedule;
  schedule.horizon = o.max_steps;
  RL_RETURN_IF_ERROR(ValidateLrSchedule(schedule));
  // bf16: the masters start from the float32 weights, and hold the result at the end.
  model::NamedTensors masters_from;
  const model::DType dtype = model->dtype();
  if (o.bf16) {
    RL_ASSIGN_OR_RETURN(masters_from, ToBf16KeepingMasters(model));
  }
  AdamW opt(model->NamedParameters(), o.adamw, masters_from);
  masters_from.clear();
  auto result = SftLoop(model, &opt, samples, pad_id, eval, o, schedule, on_step, stop);
  if (o.bf16 && result.ok()) {
    RL_RETURN_IF_ERROR(model->ToDType(dtype));
    RL_RETURN_IF_ERROR(model->LoadNamedParameters(opt.Weights()));
  }
  return result;
}

static Result<SftResult> SftLoop(model::Transformer* model, AdamW* opt_in, const std::vector<Sample>& samples,
                                 int64_t pad_id, const SftEval* eval, const SftOptions& o,
                                 const LrSchedule& schedule, const std::function<void(const SftProgress&)>& on_step,
                                 const std::atomic<bool>& stop) {
  AdamW& opt = *opt_in;
  std::mt19937_64 gen(o.seed);
  std::vector<size_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  size_t next = order.size();
  auto start = std::chrono::steady_clock::now();
  SftResult result;
  double last_eval_s = 0, trained_since_eval_s = 0;
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
    auto step_start = std::chrono::steady_clock::now();
    p.lr = LearningRate(schedule, step - 1);
    RL_ASSIGN_OR_RETURN(p.loss, SftStep(model, &opt, batch, pad_id, p.lr, o.grad_clip));
    trained_since_eval_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    p.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    result.steps = step;
    result.seconds = p.seconds;
    // Near the target the accuracy can climb several points a step (the jump of the learning
    // curve of the addition demo): from half the target on, evaluate as often as every step, so
    // that SFT stops soon after crossing it, but only once the training since the last evaluation
    // took as long as that evaluation did. Where an evaluation costs several steps (a real
    // vocabulary, longer answers) and the curve climbs slowly, evaluating at every step would
    // make SFT several times slower; this keeps evaluations to at most half the time.
    bool near_target = result.accuracy >= o.target_accuracy / 2 && trained_since_eval_s >= last_eval_s;
    if (eval && (step % o.eval_every == 0 || near_target || step == o.max_steps)) {
      auto eval_start = std::chrono::steady_clock::now();
      RL_ASSIGN_OR_RETURN(p.accuracy, GreedyAccuracy(*model, *eval->encoder, *eval->set, eval->verifier,
                                                     o.eval_max_new_tokens));
      last_eval_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - eval_start).count();
      trained_since_eval_s = 0;
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
