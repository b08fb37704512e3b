#include "rl/train/grpo_trainer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include <spdlog/spdlog.h>

#include "rl/core/fs.h"
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
  if (!(options.gamma >= 0 && options.gamma <= 1) || !(options.lambda >= 0 && options.lambda <= 1)) {
    return Status::InvalidArgument("GAE's gamma and lambda must be in [0, 1]");
  }
  if (!(options.critic_lr >= 0) || !std::isfinite(options.critic_lr)) {
    return Status::InvalidArgument("the critic's learning rate must be 0 (the policy's) or positive");
  }
  if (options.ref_from_rows && !(options.kl_coef > 0)) {
    return Status::InvalidArgument("--ref-from-queue is the KL term's reference: it needs --kl-coef above 0");
  }
  if (!(options.sft_coef >= 0) || !std::isfinite(options.sft_coef)) {
    return Status::InvalidArgument("--sft-coef must be 0 (off) or positive");
  }
  if (options.sft_batch < 1) return Status::InvalidArgument("--sft-batch must be positive");
  if (options.norm == LossNorm::kSequenceSumNorm && !(options.norm_constant > 0)) {
    return Status::InvalidArgument("--loss-norm seq-mean-token-sum-norm needs --loss-norm-constant C > 0");
  }
  return Status::OK();
}

Result<std::unique_ptr<GrpoTrainer>> GrpoTrainer::Create(model::Transformer policy,
                                                         std::optional<model::Transformer> reference,
                                                         GrpoOptions options, std::optional<ValueModel> critic) {
  if (options.kl_coef > 0 && !reference && !options.ref_from_rows) {
    return Status::InvalidArgument("a KL term needs a reference model");
  }
  if (reference && options.ref_from_rows) {
    return Status::InvalidArgument("the reference log-probabilities come from the rows or from a model, not both");
  }
  RL_RETURN_IF_ERROR(ValidateGrpoOptions(options));
  if (options.routing_replay && policy.config().SparseLayerCount() == 0) {
    return Status::InvalidArgument("routing replay (--routing-replay) needs a mixture-of-experts policy; this one "
                                   "has no sparse layers");
  }
  if (options.sft_coef > 0 && (!options.sft_examples || options.sft_examples->empty())) {
    return Status::InvalidArgument("an SFT mix (--sft-coef) needs SFT examples (--sft-data)");
  }
  for (const std::string& prefix : options.freeze) {
    const model::NamedTensors params = policy.NamedParameters();
    if (prefix.empty() || std::none_of(params.begin(), params.end(),
                                       [&](const auto& p) { return p.first.rfind(prefix, 0) == 0; })) {
      return Status::InvalidArgument("--freeze '" + prefix + "' names no parameter of the policy (names such as " +
                                     params.front().first + ")");
    }
  }
  if (!options.dump_dir.empty()) RL_RETURN_IF_ERROR(MakeDirs(options.dump_dir));
  if (options.advantage != Advantage::kGae) {
    critic.reset();
  } else if (!critic) {
    RL_ASSIGN_OR_RETURN(critic, ValueModel::FromPolicy(policy));
  }
  // bf16: the masters start from the float32 weights, before they are rounded.
  model::NamedTensors masters_from;
  if (options.bf16) {
    RL_ASSIGN_OR_RETURN(masters_from, ToBf16KeepingMasters(&policy));
    if (reference) RL_RETURN_IF_ERROR(reference->ToDType(model::DType::kBF16));
  }
  RL_RETURN_IF_ERROR(policy.To(options.device));
  if (reference) RL_RETURN_IF_ERROR(reference->To(options.device));
  if (critic) RL_RETURN_IF_ERROR(critic->To(options.device));
  return std::unique_ptr<GrpoTrainer>(
      new GrpoTrainer(std::move(policy), std::move(reference), options, std::move(critic), masters_from));
}

GrpoTrainer::GrpoTrainer(model::Transformer policy, std::optional<model::Transformer> reference,
                         GrpoOptions options, std::optional<ValueModel> critic, const model::NamedTensors& masters_from)
    : policy_(std::move(policy)), reference_(std::move(reference)), options_(options), critic_(std::move(critic)) {
  // A frozen parameter never gets a gradient, so AdamW (which skips those) never moves it.
  for (auto& [name, p] : policy_.NamedParameters()) {
    for (const std::string& prefix : options_.freeze) {
      if (name.rfind(prefix, 0) == 0) p.requires_grad_(false);
    }
  }
  optimizer_ = std::make_unique<AdamW>(policy_.NamedParameters(), options_.adamw, masters_from);
  if (critic_) critic_optimizer_ = std::make_unique<AdamW>(critic_->NamedParameters(), options_.adamw);
  BeginStep();
}

void GrpoTrainer::Totals::Add(const Totals& t) {
  loss += t.loss;
  tokens += t.tokens;
  sequences += t.sequences;
  clipped += t.clipped;
  kl += t.kl;
  value_loss += t.value_loss;
  value_clipped += t.value_clipped;
  gap += t.gap;
  gap_tokens += t.gap_tokens;
  routes_agreed += t.routes_agreed;
  routes_replayed += t.routes_replayed;
  weight_sum += t.weight_sum;
  weight_max = std::max(weight_max, t.weight_max);
  capped += t.capped;
}

void GrpoTrainer::BeginStep() {
  optimizer_->ZeroGrad();
  if (critic_optimizer_) critic_optimizer_->ZeroGrad();
  acc_ = StepStats();
  skipped_ = 0;
  acc_.min_version = INT64_MAX;
  acc_.max_version = INT64_MIN;
  step_ = Totals();
  reward_sum_ = 0;
  sft_nll_ = sft_tokens_ = 0;
  held_.clear();
  adv_.clear();
  values_.clear();
  returns_.clear();
  prox_.clear();
  dump_rewards_.clear();
  dump_groups_.clear();
  dump_adv_.clear();
  dump_turn_rewards_.clear();
  dump_turn_ends_.clear();
  dump_values_.clear();
  dump_returns_.clear();
  update_ = dump_piece_ = 0;
}

namespace {
// One advantage per response of a group, for the estimators that give every token the same one
// (before reinforce++'s whitening over the batch).
std::vector<double> ResponseAdvantages(Advantage a, const std::vector<double>& rewards) {
  switch (a) {
    case Advantage::kGrpo:
      return GroupAdvantages(rewards);
    case Advantage::kRloo:
      return LeaveOneOutAdvantages(rewards);
    case Advantage::kReinforcePPBaseline:
      return GroupCentred(rewards);
    default:
      return rewards;
  }
}
std::vector<double> RewardsOf(const Group& g) {
  std::vector<double> out;
  for (const Sample& s : g.samples) out.push_back(s.reward);
  return out;
}
}  // namespace

void GrpoTrainer::AddTurnRewards(const Group& g) {
  const bool any = std::any_of(g.samples.begin(), g.samples.end(), [](const Sample& s) {
    return std::any_of(s.turn_rewards.begin(), s.turn_rewards.end(), [](float r) { return r != 0; });
  });
  if (!any || options_.advantage == Advantage::kGae) return;
  if (options_.advantage != Advantage::kGrpo) {
    if (!warned_turn_rewards_) {
      spdlog::warn("rows carry turn rewards, which --advantage {} ignores (grpo and gae use them)",
                   AdvantageName(options_.advantage));
      warned_turn_rewards_ = true;
    }
    return;
  }
  std::vector<int64_t> lengths;
  std::vector<std::vector<int64_t>> ends;
  std::vector<std::vector<float>> rewards;
  for (const Sample& s : g.samples) {
    lengths.push_back(static_cast<int64_t>(s.response_ids.size()));
    ends.push_back(s.turn_ends);
    rewards.push_back(s.turn_rewards);
  }
  std::vector<std::vector<float>> process = ProcessAdvantages(lengths, ends, rewards);
  for (size_t i = 0; i < g.samples.size(); ++i) {
    std::vector<float>& a = adv_.at(&g.samples[i]);
    for (size_t t = 0; t < a.size(); ++t) a[t] += process[i][t];
  }
}

Status GrpoTrainer::Accumulate(const std::vector<Group>& groups) {
  std::vector<const Sample*> samples;
  for (const Group& g : groups) {
    for (const Sample& s : g.samples) {
      samples.push_back(&s);
      reward_sum_ += s.reward;
      acc_.min_version = std::min(acc_.min_version, s.version);
      acc_.max_version = std::max(acc_.max_version, s.version);
    }
  }
  acc_.samples += static_cast<int64_t>(samples.size());
  if (Buffered()) {
    acc_.groups += static_cast<int64_t>(groups.size());
    held_.insert(held_.end(), groups.begin(), groups.end());
    return Status::OK();
  }
  for (const Group& g : groups) {
    std::vector<double> a = ResponseAdvantages(options_.advantage, RewardsOf(g));
    for (size_t i = 0; i < g.samples.size(); ++i) {
      const Sample& s = g.samples[i];
      adv_[&s].assign(s.response_ids.size(), static_cast<float>(a[i]));
    }
    AddTurnRewards(g);
    for (const Sample& s : g.samples) KeepForDump(s, acc_.groups);
    acc_.groups++;
  }
  auto t = Backward(samples);
  adv_.clear();  // the caller's groups go away
  if (!t.ok()) return t.status();
  step_.Add(*t);
  return Status::OK();
}

Status GrpoTrainer::HeldAdvantages() {
  std::vector<const Sample*> all;
  for (const Group& g : held_) {
    for (const Sample& s : g.samples) all.push_back(&s);
  }
  if (critic_) {
    RL_RETURN_IF_ERROR(RecordPerToken(all, true, &values_));
    std::vector<std::vector<float>> tokens;
    std::vector<const std::vector<int64_t>*> masks;  // tool tokens: neither steps nor whitened
    for (const Sample* s : all) {
      const auto length = static_cast<int64_t>(s->response_ids.size());
      tokens.push_back(Gae(TokenRewards(s->reward, length, s->turn_ends, s->turn_rewards), values_.at(s),
                           options_.gamma, options_.lambda, &returns_[s], s->loss_mask));
      masks.push_back(&s->loss_mask);
    }
    RL_RETURN_IF_ERROR(WhitenTokens(&tokens, RankSum(), masks));
    for (size_t i = 0; i < all.size(); ++i) adv_[all[i]] = std::move(tokens[i]);
  } else {
    std::vector<double> x;
    std::vector<int64_t> lengths;
    for (const Group& g : held_) {
      for (double a : ResponseAdvantages(options_.advantage, RewardsOf(g))) x.push_back(a);
      for (const Sample& s : g.samples) lengths.push_back(TrainedTokens(s));  // weighs each response as the loss does
    }
    if (!PerGroup(options_.advantage)) RL_RETURN_IF_ERROR(WhitenPerResponse(&x, lengths, RankSum()));
    for (size_t i = 0; i < all.size(); ++i) adv_[all[i]].assign(all[i]->response_ids.size(), static_cast<float>(x[i]));
    for (const Group& g : held_) AddTurnRewards(g);
  }
  for (size_t g = 0; g < held_.size(); ++g) {
    for (const Sample& s : held_[g].samples) KeepForDump(s, static_cast<int64_t>(g));
  }
  return Status::OK();
}

std::vector<std::vector<const Sample*>> GrpoTrainer::MicroBatches(const std::vector<const Sample*>& samples) const {
  std::vector<const Sample*> sorted = samples;
  auto length = [](const Sample* s) { return s->prompt_ids.size() + s->response_ids.size(); };
  std::stable_sort(sorted.begin(), sorted.end(), [&](const Sample* a, const Sample* b) { return length(a) < length(b); });
  std::vector<std::vector<const Sample*>> pieces;
  for (size_t at = 0; at < sorted.size(); at += static_cast<size_t>(options_.micro_batch)) {
    const size_t end = std::min(sorted.size(), at + static_cast<size_t>(options_.micro_batch));
    pieces.emplace_back(sorted.begin() + static_cast<std::ptrdiff_t>(at), sorted.begin() + static_cast<std::ptrdiff_t>(end));
  }
  return pieces;
}

Result<GrpoTrainer::Totals> GrpoTrainer::Backward(const std::vector<const Sample*>& samples) {
  Totals total;
  for (const std::vector<const Sample*>& piece : MicroBatches(samples)) {
    RL_ASSIGN_OR_RETURN(Totals t, BackwardPiece(piece));
    total.Add(t);
  }
  return total;
}

Result<GrpoTrainer::Totals> GrpoTrainer::BackwardPiece(const std::vector<const Sample*>& samples) {
  return model::TorchGuard("grpo accumulate", [&]() -> Result<Totals> {
    TokenBatch batch = DeviceBatch(samples);
    RL_ASSIGN_OR_RETURN(at::Tensor ref_lp, ReferenceLogprobs(samples, batch));
    at::Tensor own;  // the routers' own picks, to measure how far they agree with the replayed ones
    const bool agreement = update_ == 0 && batch.routes.defined();
    RL_ASSIGN_OR_RETURN(at::Tensor new_lp, TokenLogprobs(policy_, batch.tokens, batch.mask, options_.temperature,
                                                         batch.routes, agreement ? &own : nullptr));
    at::Tensor a = PerToken(samples, batch.mask, adv_);
    at::Tensor prox_lp;
    if (options_.off.kind == Correction::kDecoupled) {
      // Streaming, the weights before the update are the current ones; over minibatches, those
      // the step started from, recorded before its first update.
      prox_lp = prox_.empty() ? new_lp.detach() : PerToken(samples, batch.mask, prox_);
    }
    RL_ASSIGN_OR_RETURN(LossSums sums, PolicyLossSums(new_lp, batch.old_lp, batch.mask, a, options_.clip,
                                                      options_.norm, ref_lp, options_.kl_coef, options_.off, prox_lp,
                                                      options_.kl_estimator));
    const bool dumping = !options_.dump_dir.empty();
    model::NamedTensors dump;
    if (dumping) {
      dump = {{"new_lp", new_lp.detach()}, {"old_lp", batch.old_lp}, {"mask", batch.mask}, {"adv", a}};
      if (ref_lp.defined()) dump.push_back({"ref_lp", ref_lp});
      if (prox_lp.defined()) dump.push_back({"prox_lp", prox_lp});
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
    if (agreement) {
      const RouteAgreement r = AgreementOf(batch.routes, own);
      t.routes_agreed = static_cast<double>(r.agreed);
      t.routes_replayed = static_cast<double>(r.replayed);
    }
    if (critic_) RL_RETURN_IF_ERROR(BackwardCritic(samples, batch, &t, dumping ? &dump : nullptr));
    if (dumping) RL_RETURN_IF_ERROR(DumpPiece(std::move(dump), sums, t));
    return t;
  });
}

Status GrpoTrainer::BackwardCritic(const std::vector<const Sample*>& samples, const TokenBatch& batch, Totals* t,
                                   model::NamedTensors* dump) {
  RL_ASSIGN_OR_RETURN(at::Tensor all, critic_->Values(batch.tokens, CriticRoutes(batch)));
  at::Tensor values = all.narrow(1, 0, batch.mask.size(1));
  at::Tensor old_values = PerToken(samples, batch.mask, values_), returns = PerToken(samples, batch.mask, returns_);
  RL_ASSIGN_OR_RETURN(ValueSums v, ValueLoss(values, old_values, returns, batch.mask, options_.value_clip));
  v.sum.backward();
  t->value_loss += v.sum.item<double>();
  t->value_clipped += v.clipped;
  if (dump) {
    dump->push_back({"values", values.detach()});
    dump->push_back({"old_values", old_values});
    dump->push_back({"returns", returns});
  }
  return Status::OK();
}

Result<double> GrpoTrainer::Update(const Totals& t, double lr) {
  double denom = LossDenominator(options_.norm, t.tokens, t.sequences, options_.norm_constant);
  if (denom <= 0) return Status::DataError("no response tokens in this step");
  optimizer_->ScaleGrad(1.0 / denom);
  double norm = optimizer_->ClipGradNorm(options_.grad_clip);
  double critic_norm = 0;
  if (critic_optimizer_) {
    critic_optimizer_->ScaleGrad(1.0 / t.tokens);
    critic_norm = critic_optimizer_->ClipGradNorm(options_.grad_clip);
  }
  if (!std::isfinite(norm) || !std::isfinite(critic_norm)) {
    // A NaN or infinite gradient would make every weight NaN (a NaN norm is not above the clip,
    // so nothing scales it down), and every version after it: the update is skipped instead. The
    // norm is the reduced one, so every rank skips it alike.
    optimizer_->ZeroGrad();
    if (critic_optimizer_) critic_optimizer_->ZeroGrad();
    ++skipped_;
    ++update_;
    dump_piece_ = 0;
    return norm;
  }
  RL_RETURN_IF_ERROR(optimizer_->Step(lr));
  if (critic_optimizer_) {
    // The critic's rate follows the policy's schedule, scaled to its own peak.
    const double critic_lr = options_.critic_lr > 0 ? lr * options_.critic_lr / options_.schedule.lr : lr;
    RL_RETURN_IF_ERROR(critic_optimizer_->Step(critic_lr));
  }
  ++update_;
  dump_piece_ = 0;
  return norm;
}

Result<StepStats> GrpoTrainer::FinishStep() {
  // Streaming, the whole step's gradients and totals; buffered, the counts alone (each update
  // completes its own, FinishBuffered).
  Status s = Status::OK();
  if (!Buffered()) {
    s = CompleteGradients(&step_, true);
  } else if (group_) {
    s = ReduceTotals(&step_, true);
  }
  if (s.ok() && acc_.samples == 0) s = Status::InvalidArgument("no samples in this step");
  if (!s.ok()) {
    BeginStep();
    return s;
  }
  StepStats out = acc_;
  out.mean_reward = reward_sum_ / static_cast<double>(out.samples);
  // Adam's first steps move every weight by about lr whatever its gradient (m/sqrt(v) is the sign
  // of g at t = 1): on a freshly fine-tuned policy that random-looking jolt is what a warm-up avoids.
  // The schedule counts training steps; every update of a step takes the same rate. The
  // optimizer's step count comes back with a checkpoint, so a resumed run keeps its schedule.
  out.lr = LearningRate(options_.schedule, optimizer_->steps() / (options_.minibatches * options_.epochs));
  if (Buffered()) {
    auto r = FinishBuffered(out, out.lr);
    BeginStep();
    return r;
  }
  if (!options_.dump_dir.empty()) {
    if (Status s = DumpBatch(); !s.ok()) {
      BeginStep();
      return s;
    }
  }
  auto norm = Update(step_, out.lr);
  if (!norm.ok()) {
    BeginStep();
    return norm.status();
  }
  out.grad_norm = *norm;
  out.updates = 1;
  out.skipped_updates = skipped_;
  double denom = LossDenominator(options_.norm, step_.tokens, step_.sequences, options_.norm_constant);
  out.loss = step_.loss / denom;
  out.tokens = static_cast<int64_t>(step_.tokens);
  out.clip_fraction = step_.tokens > 0 ? step_.clipped / step_.tokens : 0;
  out.kl = step_.tokens > 0 ? step_.kl / step_.tokens : 0;
  out.logprob_gap = step_.gap_tokens > 0 ? step_.gap / step_.gap_tokens : 0;
  SetAgreement(step_, &out);
  out.sft_loss = sft_tokens_ > 0 ? sft_nll_ / sft_tokens_ : 0;
  SetWeights(step_, &out);
  BeginStep();
  return out;
}

void GrpoTrainer::SetAgreement(const Totals& t, StepStats* out) {
  out->routes_replayed = static_cast<int64_t>(t.routes_replayed);
  out->route_agreement = t.routes_replayed > 0 ? t.routes_agreed / t.routes_replayed : 0;
}

void GrpoTrainer::SetWeights(const Totals& t, StepStats* out) {
  if (options_.off.kind == Correction::kNone || t.tokens <= 0) return;
  out->is_weight_mean = t.weight_sum / t.tokens;
  out->is_weight_max = t.weight_max;
  out->is_capped_fraction = t.capped / t.tokens;
}

Status GrpoTrainer::RecordPerToken(const std::vector<const Sample*>& samples, bool critic, TokenValues* out) {
  return model::TorchGuard("grpo per-token values", [&]() -> Status {
    c10::NoGradGuard no_grad;
    for (const std::vector<const Sample*>& piece : MicroBatches(samples)) {
      TokenBatch batch = DeviceBatch(piece);
      at::Tensor x;
      if (critic) {
        RL_ASSIGN_OR_RETURN(x, critic_->Values(batch.tokens, CriticRoutes(batch)));
      } else {
        RL_ASSIGN_OR_RETURN(x, TokenLogprobs(policy_, batch.tokens, batch.mask, options_.temperature, batch.routes));
      }
      x = x.to(at::kCPU).contiguous();
      auto acc = x.accessor<float, 2>();
      for (size_t i = 0; i < piece.size(); ++i) {
        const Sample& s = *piece[i];
        std::vector<float>& row = (*out)[&s];
        row.clear();
        int64_t p = static_cast<int64_t>(s.prompt_ids.size());
        for (size_t j = 0; j < s.response_ids.size(); ++j) row.push_back(acc[i][p + j - 1]);
      }
    }
    return Status::OK();
  });
}

Result<at::Tensor> GrpoTrainer::ReferenceLogprobs(const std::vector<const Sample*>& samples,
                                                  const TokenBatch& batch) const {
  if (options_.kl_coef <= 0) return at::Tensor();
  if (reference_) {
    c10::NoGradGuard no_grad;
    // With routing replay the reference takes the rollout's experts too: the KL term then
    // measures how far the weights moved, not where the two routers happen to differ (at the
    // first step, policy and reference are one network and the term is 0).
    return TokenLogprobs(*reference_, batch.tokens, batch.mask, options_.temperature, batch.routes);
  }
  // As the model's: the value at each position the mask keeps, 0 elsewhere.
  at::Tensor out = at::zeros(batch.mask.sizes(), at::kFloat);
  const at::Tensor host_mask = batch.mask.to(at::kCPU);
  auto acc = out.accessor<float, 2>();
  auto mask = host_mask.accessor<float, 2>();
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = *samples[i];
    if (s.ref_logprobs.size() != s.response_ids.size()) {
      return Status::DataError("row " + std::to_string(s.index) + " has no column 'ref_logprobs' (the reference "
                               "role's): the KL term needs it with --ref-from-queue");
    }
    const int64_t p = static_cast<int64_t>(s.prompt_ids.size());
    for (size_t j = 0; j < s.ref_logprobs.size(); ++j) {
      if (mask[i][p + j - 1] != 0) acc[i][p + j - 1] = s.ref_logprobs[j];
    }
  }
  return out.to(options_.device);
}

at::Tensor GrpoTrainer::PerToken(const std::vector<const Sample*>& samples, const at::Tensor& mask,
                                 const TokenValues& values) {
  at::Tensor out = at::zeros(mask.sizes(), at::kFloat);
  auto acc = out.accessor<float, 2>();
  for (size_t i = 0; i < samples.size(); ++i) {
    const Sample& s = *samples[i];
    const std::vector<float>& v = values.at(&s);
    int64_t p = static_cast<int64_t>(s.prompt_ids.size());
    for (size_t j = 0; j < v.size(); ++j) acc[i][p + j - 1] = v[j];
  }
  return out.to(mask.device());
}

at::Tensor GrpoTrainer::CriticRoutes(const TokenBatch& batch) const {
  // A critic of the policy's experts (a copy of it, or a backbone of the same mixture) replays the
  // rollout's routes as the policy does; one of other experts (--critic-config) routes on its own.
  const model::ModelConfig &p = policy_.config(), &c = critic_->config();
  const bool same = c.SparseLayerCount() == p.SparseLayerCount() && c.moe.num_experts == p.moe.num_experts &&
                    c.moe.num_experts_per_tok == p.moe.num_experts_per_tok;
  return same ? batch.routes : at::Tensor();
}

TokenBatch GrpoTrainer::DeviceBatch(const std::vector<const Sample*>& samples) const {
  const model::ModelConfig& c = policy_.config();
  std::vector<int64_t> route_shape;
  if (options_.routing_replay && c.SparseLayerCount() > 0) route_shape = {c.SparseLayerCount(), c.moe.num_experts_per_tok};
  TokenBatch b = MakeTokenBatch(samples, options_.pad_id, route_shape);
  if (options_.device.is_cpu()) return b;
  return TokenBatch{b.tokens.to(options_.device), b.mask.to(options_.device), b.old_lp.to(options_.device),
                    b.routes.defined() ? b.routes.to(options_.device) : b.routes};
}

Result<StepStats> GrpoTrainer::FinishBuffered(StepStats out, double lr) {
  std::vector<const Sample*> samples;
  for (const Group& g : held_) {
    for (const Sample& s : g.samples) samples.push_back(&s);
  }
  const size_t n = samples.size();
  // As many minibatches on every rank (out.samples: the whole batch's); a rank with fewer
  // samples than that has empty ones, and still takes part in their reductions.
  const size_t parts = std::min(static_cast<size_t>(out.samples), static_cast<size_t>(options_.minibatches));
  RL_RETURN_IF_ERROR(HeldAdvantages());
  if (!options_.dump_dir.empty()) RL_RETURN_IF_ERROR(DumpBatch());
  if (options_.off.kind == Correction::kDecoupled) RL_RETURN_IF_ERROR(RecordPerToken(samples, false, &prox_));
  // Seeded by the step (a resumed run repeats the order) and the rank (rank 0's is one trainer's).
  const uint64_t rank = group_ ? static_cast<uint64_t>(group_->rank()) : 0;
  std::mt19937_64 gen(options_.seed ^ (0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(optimizer_->steps() + 1)) ^
                      (0xbf58476d1ce4e5b9ULL * rank));
  std::vector<size_t> order(n);
  Totals all;
  double loss_sum = 0, norm_sum = 0, value_sum = 0;
  for (int64_t epoch = 0; epoch < options_.epochs; ++epoch) {
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), gen);
    for (size_t part = 0; part < parts; ++part) {
      // Minibatch `part` is order[n * part / parts, n * (part + 1) / parts).
      std::vector<const Sample*> mb;
      for (size_t k = n * part / parts; k < n * (part + 1) / parts; ++k) mb.push_back(samples[order[k]]);
      optimizer_->ZeroGrad();
      if (critic_optimizer_) critic_optimizer_->ZeroGrad();
      RL_ASSIGN_OR_RETURN(Totals t, Backward(mb));
      RL_RETURN_IF_ERROR(CompleteGradients(&t, false));
      RL_ASSIGN_OR_RETURN(double norm, Update(t, lr));
      loss_sum += t.loss / LossDenominator(options_.norm, t.tokens, t.sequences, options_.norm_constant);
      if (t.tokens > 0) value_sum += t.value_loss / t.tokens;
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
  SetAgreement(all, &out);
  if (critic_) {
    out.value_loss = value_sum / static_cast<double>(out.updates);
    out.value_clip_fraction = all.tokens > 0 ? all.value_clipped / all.tokens : 0;
  }
  out.sft_loss = sft_tokens_ > 0 ? sft_nll_ / sft_tokens_ : 0;
  out.skipped_updates = skipped_;
  SetWeights(all, &out);
  return out;
}

Status GrpoTrainer::CompleteGradients(Totals* t, bool counts) {
  if (group_) RL_RETURN_IF_ERROR(ReduceTotals(t, counts));
  // Every rank has the same totals now: all of them skip the rest together.
  if (counts && acc_.samples == 0) return Status::OK();
  const double denom = LossDenominator(options_.norm, t->tokens, t->sequences, options_.norm_constant);
  if (options_.sft_coef > 0 && denom > 0) RL_RETURN_IF_ERROR(BackwardSftMix(denom));
  if (group_) RL_RETURN_IF_ERROR(ReduceGradients());
  return Status::OK();
}

}  // namespace rl::train
