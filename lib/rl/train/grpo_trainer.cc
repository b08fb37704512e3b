#include "rl/train/grpo_trainer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <nlohmann/json.hpp>

#include "rl/core/fs.h"
#include "rl/model/safetensors.h"
#include "rl/model/torch_guard.h"

namespace rl::train {

Status ValidateGrpoOptions(const GrpoOptions& options) {
  if (options.micro_batch < 1) return Status::InvalidArgument("micro batch must be positive");
  if (options.minibatches < 1 || options.epochs < 1) {
    return Status::InvalidArgument("minibatches and epochs must be positive");
  }
  if (!(options.temperature > 0) || !std::isfinite(options.temperature)) {
    return Status::InvalidArgument("the trainer's temperature must be positive and finite (greedy rollouts have none)");
  }
  if (options.norm == LossNorm::kSequenceSumNorm && !(options.norm_constant > 0)) {
    return Status::InvalidArgument("--loss-norm seq-mean-token-sum-norm needs --loss-norm-constant C > 0");
  }
  return Status::OK();
}

Result<std::unique_ptr<GrpoTrainer>> GrpoTrainer::Create(model::Transformer policy,
                                                         std::optional<model::Transformer> reference,
                                                         GrpoOptions options) {
  if (options.kl_coef > 0 && !reference) return Status::InvalidArgument("a KL term needs a reference model");
  RL_RETURN_IF_ERROR(ValidateGrpoOptions(options));
  if (!options.dump_dir.empty()) RL_RETURN_IF_ERROR(MakeDirs(options.dump_dir));
  return std::unique_ptr<GrpoTrainer>(new GrpoTrainer(std::move(policy), std::move(reference), options));
}

GrpoTrainer::GrpoTrainer(model::Transformer policy, std::optional<model::Transformer> reference,
                         GrpoOptions options)
    : policy_(std::move(policy)), reference_(std::move(reference)), options_(options) {
  optimizer_ = std::make_unique<AdamW>(policy_.NamedParameters(), options_.adamw);
  BeginStep();
}

void GrpoTrainer::Totals::Add(const Totals& t) {
  loss += t.loss;
  tokens += t.tokens;
  sequences += t.sequences;
  clipped += t.clipped;
  kl += t.kl;
  gap += t.gap;
  gap_tokens += t.gap_tokens;
  weight_sum += t.weight_sum;
  weight_max = std::max(weight_max, t.weight_max);
  capped += t.capped;
}

void GrpoTrainer::BeginStep() {
  optimizer_->ZeroGrad();
  acc_ = StepStats();
  acc_.min_version = INT64_MAX;
  acc_.max_version = INT64_MIN;
  step_ = Totals();
  reward_sum_ = 0;
  held_.clear();
  held_adv_.clear();
  prox_.clear();
  dump_rewards_.clear();
  dump_groups_.clear();
  dump_adv_.clear();
  update_ = dump_piece_ = 0;
}

Status GrpoTrainer::Accumulate(const std::vector<Group>& groups) {
  std::vector<const Sample*> samples;
  std::vector<double> adv;
  for (const Group& g : groups) {
    std::vector<double> rewards;
    for (const Sample& s : g.samples) rewards.push_back(s.reward);
    std::vector<double> a = GroupAdvantages(rewards);
    for (size_t i = 0; i < g.samples.size(); ++i) {
      const Sample& s = g.samples[i];
      samples.push_back(&s);
      adv.push_back(a[i]);
      reward_sum_ += s.reward;
      if (!options_.dump_dir.empty()) {
        dump_rewards_.push_back(static_cast<float>(s.reward));
        dump_groups_.push_back(static_cast<float>(acc_.groups));
        dump_adv_.push_back(static_cast<float>(a[i]));
      }
      acc_.min_version = std::min(acc_.min_version, s.version);
      acc_.max_version = std::max(acc_.max_version, s.version);
    }
    acc_.groups++;
  }
  acc_.samples += static_cast<int64_t>(samples.size());
  if (Buffered()) {
    held_.insert(held_.end(), groups.begin(), groups.end());
    held_adv_.insert(held_adv_.end(), adv.begin(), adv.end());
    return Status::OK();
  }
  RL_ASSIGN_OR_RETURN(Totals t, Backward(samples, adv));
  step_.Add(t);
  return Status::OK();
}

Result<GrpoTrainer::Totals> GrpoTrainer::Backward(const std::vector<const Sample*>& samples,
                                                  const std::vector<double>& adv) {
  // A micro-batch is padded to its longest sequence, so one runaway response (no <eos> until the
  // context is full) would make its whole micro-batch that long: take the samples by length.
  std::vector<size_t> order(samples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto length = [&](size_t i) { return samples[i]->prompt_ids.size() + samples[i]->response_ids.size(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return length(a) < length(b); });
  Totals total;
  for (size_t at = 0; at < order.size(); at += options_.micro_batch) {
    size_t end = std::min(order.size(), at + static_cast<size_t>(options_.micro_batch));
    std::vector<const Sample*> piece;
    std::vector<double> piece_adv;
    for (size_t k = at; k < end; ++k) {
      piece.push_back(samples[order[k]]);
      piece_adv.push_back(adv[order[k]]);
    }
    RL_ASSIGN_OR_RETURN(Totals t, BackwardPiece(piece, piece_adv));
    total.Add(t);
  }
  return total;
}

Result<GrpoTrainer::Totals> GrpoTrainer::BackwardPiece(const std::vector<const Sample*>& samples,
                                                       const std::vector<double>& adv) {
  return model::TorchGuard("grpo accumulate", [&]() -> Result<Totals> {
    TokenBatch batch = MakeTokenBatch(samples, options_.pad_id);
    at::Tensor ref_lp;
    if (reference_ && options_.kl_coef > 0) {
      c10::NoGradGuard no_grad;
      RL_ASSIGN_OR_RETURN(ref_lp, TokenLogprobs(*reference_, batch.tokens, batch.mask, options_.temperature));
    }
    RL_ASSIGN_OR_RETURN(at::Tensor new_lp, TokenLogprobs(policy_, batch.tokens, batch.mask, options_.temperature));
    at::Tensor a = at::tensor(std::vector<float>(adv.begin(), adv.end()), at::kFloat);
    at::Tensor prox_lp;
    if (options_.off.kind == Correction::kDecoupled) {
      // Streaming, the weights before the update are the current ones; over minibatches, those
      // the step started from, recorded before its first update.
      prox_lp = prox_.empty() ? new_lp.detach() : ProximalTensor(samples, batch.mask);
    }
    RL_ASSIGN_OR_RETURN(LossSums sums, PolicyLossSums(new_lp, batch.old_lp, batch.mask, a, options_.clip,
                                                      options_.norm, ref_lp, options_.kl_coef, options_.off, prox_lp));
    if (!options_.dump_dir.empty()) {
      RL_RETURN_IF_ERROR(DumpPiece(new_lp, batch.old_lp, batch.mask, a, ref_lp, prox_lp, sums));
    }
    sums.sum.backward();
    Totals t{sums.sum.item<double>(), sums.tokens, sums.sequences, sums.clipped, sums.kl};
    t.weight_sum = sums.weight_sum;
    t.weight_max = sums.weight_max;
    t.capped = sums.capped;
    if (update_ == 0) {  // the weights the step started from
      t.gap = ((new_lp.detach() - batch.old_lp).abs() * batch.mask).sum().item<double>();
      t.gap_tokens = sums.tokens;
    }
    return t;
  });
}

Result<double> GrpoTrainer::Update(const Totals& t, double lr) {
  double denom = LossDenominator(options_.norm, t.tokens, t.sequences, options_.norm_constant);
  if (denom <= 0) return Status::DataError("no response tokens in this step");
  optimizer_->ScaleGrad(1.0 / denom);
  double norm = optimizer_->ClipGradNorm(options_.grad_clip);
  RL_RETURN_IF_ERROR(optimizer_->Step(lr));
  ++update_;
  dump_piece_ = 0;
  return norm;
}

namespace {
std::string DumpName(const std::string& dir, int64_t step, const std::string& rest) {
  return dir + "/step-" + std::to_string(step) + "-" + rest + ".safetensors";
}
at::Tensor Floats(const std::vector<float>& v) { return at::tensor(v, at::kFloat); }
}  // namespace

Status GrpoTrainer::DumpPiece(const at::Tensor& new_lp, const at::Tensor& old_lp, const at::Tensor& mask,
                              const at::Tensor& adv, const at::Tensor& ref_lp, const at::Tensor& prox_lp,
                              const LossSums& sums) {
  model::NamedTensors t = {{"new_lp", new_lp.detach()}, {"old_lp", old_lp}, {"mask", mask}, {"adv", adv}};
  if (ref_lp.defined()) t.push_back({"ref_lp", ref_lp});
  if (prox_lp.defined()) t.push_back({"prox_lp", prox_lp});
  auto num = [](double x) { return nlohmann::json(x).dump(); };
  model::Metadata m = {{"sum", num(sums.sum.item<double>())}, {"tokens", num(sums.tokens)},
                       {"sequences", num(sums.sequences)},    {"clipped", num(sums.clipped)},
                       {"kl", num(sums.kl)},                  {"clip", num(options_.clip)},
                       {"kl_coef", num(options_.kl_coef)},    {"norm", std::to_string(static_cast<int>(options_.norm))},
                       {"correction", std::to_string(static_cast<int>(options_.off.kind))},
                       {"cap", num(options_.off.cap)},        {"weight_sum", num(sums.weight_sum)},
                       {"weight_max", num(sums.weight_max)},  {"capped", num(sums.capped)}};
  const int64_t step = optimizer_->steps() / (options_.minibatches * options_.epochs);
  return model::WriteSafetensorsFile(
      DumpName(options_.dump_dir, step, "update-" + std::to_string(update_) + "-piece-" + std::to_string(dump_piece_++)),
      t, m);
}

Status GrpoTrainer::DumpBatch() {
  const int64_t step = optimizer_->steps() / (options_.minibatches * options_.epochs);
  return model::WriteSafetensorsFile(
      DumpName(options_.dump_dir, step, "batch"),
      {{"rewards", Floats(dump_rewards_)}, {"group", Floats(dump_groups_)}, {"adv", Floats(dump_adv_)}}, {});
}

Result<StepStats> GrpoTrainer::FinishStep() {
  if (acc_.samples == 0) return Status::InvalidArgument("no samples in this step");
  StepStats out = acc_;
  out.mean_reward = reward_sum_ / static_cast<double>(out.samples);
  // Adam's first steps move every weight by about lr whatever its gradient (m/sqrt(v) is the sign
  // of g at t = 1): on a freshly fine-tuned policy that random-looking jolt is what a warm-up avoids.
  // The schedule counts training steps; every update of a step takes the same rate. The
  // optimizer's step count comes back with a checkpoint, so a resumed run keeps its schedule.
  out.lr = LearningRate(options_.schedule, optimizer_->steps() / (options_.minibatches * options_.epochs));
  if (!options_.dump_dir.empty()) {
    if (Status s = DumpBatch(); !s.ok()) {
      BeginStep();
      return s;
    }
  }
  if (Buffered()) {
    auto r = FinishBuffered(out, out.lr);
    BeginStep();
    return r;
  }
  auto norm = Update(step_, out.lr);
  if (!norm.ok()) {
    BeginStep();
    return norm.status();
  }
  out.grad_norm = *norm;
  out.updates = 1;
  double denom = LossDenominator(options_.norm, step_.tokens, step_.sequences, options_.norm_constant);
  out.loss = step_.loss / denom;
  out.tokens = static_cast<int64_t>(step_.tokens);
  out.clip_fraction = step_.tokens > 0 ? step_.clipped / step_.tokens : 0;
  out.kl = step_.tokens > 0 ? step_.kl / step_.tokens : 0;
  out.logprob_gap = step_.gap_tokens > 0 ? step_.gap / step_.gap_tokens : 0;
  SetWeights(step_, &out);
  BeginStep();
  return out;
}

void GrpoTrainer::SetWeights(const Totals& t, StepStats* out) {
  if (options_.off.kind == Correction::kNone || t.tokens <= 0) return;
  out->is_weight_mean = t.weight_sum / t.tokens;
  out->is_weight_max = t.weight_max;
  out->is_capped_fraction = t.capped / t.tokens;
}

Status GrpoTrainer::RecordProximal(const std::vector<const Sample*>& samples) {
  return model::TorchGuard("grpo proximal log-probabilities", [&]() -> Status {
    c10::NoGradGuard no_grad;
    for (size_t at = 0; at < samples.size(); at += options_.micro_batch) {
      size_t end = std::min(samples.size(), at + static_cast<size_t>(options_.micro_batch));
      std::vector<const Sample*> piece(samples.begin() + at, samples.begin() + end);
      TokenBatch batch = MakeTokenBatch(piece, options_.pad_id);
      RL_ASSIGN_OR_RETURN(at::Tensor lp, TokenLogprobs(policy_, batch.tokens, batch.mask, options_.temperature));
      auto acc = lp.accessor<float, 2>();
      for (size_t i = 0; i < piece.size(); ++i) {
        const Sample& s = *piece[i];
        std::vector<float>& out = prox_[&s];
        int64_t p = static_cast<int64_t>(s.prompt_ids.size());
        for (size_t j = 0; j < s.response_ids.size(); ++j) out.push_back(acc[i][p + j - 1]);
      }
    }
    return Status::OK();
  });
}

at::Tensor GrpoTrainer::ProximalTensor(const std::vector<const Sample*>& samples, const at::Tensor& mask) const {
  at::Tensor out = at::zeros(mask.sizes(), at::kFloat);
  auto acc = out.accessor<float, 2>();
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = *samples[i];
    const std::vector<float>& lp = prox_.at(&s);
    int64_t p = static_cast<int64_t>(s.prompt_ids.size());
    for (size_t j = 0; j < lp.size(); ++j) acc[i][p + j - 1] = lp[j];
  }
  return out;
}

Result<StepStats> GrpoTrainer::FinishBuffered(StepStats out, double lr) {
  std::vector<const Sample*> samples;
  for (const Group& g : held_) {
    for (const Sample& s : g.samples) samples.push_back(&s);
  }
  const size_t n = samples.size();
  const size_t parts = std::min(n, static_cast<size_t>(options_.minibatches));
  if (options_.off.kind == Correction::kDecoupled) RL_RETURN_IF_ERROR(RecordProximal(samples));
  std::mt19937_64 gen(options_.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(optimizer_->steps() + 1)));
  std::vector<size_t> order(n);
  Totals all;
  double loss_sum = 0, norm_sum = 0;
  for (int64_t epoch = 0; epoch < options_.epochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), gen);
    for (size_t part = 0; part < parts; ++part) {
      // Minibatch `part` is order[n * part / parts, n * (part + 1) / parts).
      std::vector<const Sample*> mb;
      std::vector<double> mb_adv;
      for (size_t k = n * part / parts; k < n * (part + 1) / parts; ++k) {
        mb.push_back(samples[order[k]]);
        mb_adv.push_back(held_adv_[order[k]]);
      }
      optimizer_->ZeroGrad();
      RL_ASSIGN_OR_RETURN(Totals t, Backward(mb, mb_adv));
      RL_ASSIGN_OR_RETURN(double norm, Update(t, lr));
      loss_sum += t.loss / LossDenominator(options_.norm, t.tokens, t.sequences, options_.norm_constant);
      norm_sum += norm;
      all.Add(t);
      out.updates++;
    }
  }
  out.loss = loss_sum / static_cast<double>(out.updates);
  out.grad_norm = norm_sum / static_cast<double>(out.updates);
  out.tokens = static_cast<int64_t>(all.tokens / static_cast<double>(options_.epochs));
  out.clip_fraction = all.tokens > 0 ? all.clipped / all.tokens : 0;
  out.kl = all.tokens > 0 ? all.kl / all.tokens : 0;
  out.logprob_gap = all.gap_tokens > 0 ? all.gap / all.gap_tokens : 0;  // the first minibatch's
  SetWeights(all, &out);
  return out;
}

}  // namespace rl::train
