// The SFT mix of GrpoTrainer (GrpoOptions::sft_coef, grpo_sft_mix.cc): an update's gradient is
// the policy loss's plus sft_coef times the gradient of the examples' token-mean NLL, computed
// here from the model's logits on a copy, under each loss normalisation; the examples an update
// takes follow the optimizer's step count, so a resumed trainer takes the same ones; bad options
// are refused.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <random>

#include "rl/train/grpo_test_util.h"
#include "rl/train/grpo_trainer.h"

namespace rl::train {
namespace {

using namespace grpo_fixture;

// Five prompt/response examples; the third trains on only part of its response (a loss mask).
std::shared_ptr<const std::vector<Sample>> Examples() {
  std::mt19937_64 gen(41);
  auto out = std::make_shared<std::vector<Sample>>();
  for (int e = 0; e < 5; ++e) {
    Sample s;
    s.prompt_ids = {1, 3 + int64_t(gen() % 10), 3 + int64_t(gen() % 10), 13};
    const int n = 2 + static_cast<int>(gen() % 4);
    for (int i = 0; i < n; ++i) s.response_ids.push_back(3 + int64_t(gen() % 10));
    s.response_ids.push_back(2);
    s.logprobs.assign(s.response_ids.size(), 0.0f);
    if (e == 2) {
      s.loss_mask.assign(s.response_ids.size(), 1);
      s.loss_mask[0] = s.loss_mask[1] = 0;
    }
    out->push_back(std::move(s));
  }
  return out;
}

// Adam's first update of a weight is lr * g / (|g| + eps) (m and v bias-corrected): with eps = 1
// it is invertible and sensitive to g's scale, which is what a mixed loss changes.
GrpoOptions MixOptions(LossNorm norm, double coef) {
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  o.adamw.eps = 1.0;
  o.grad_clip = 0;  // the clip would rescale the sum
  o.norm = norm;
  o.norm_constant = 8;
  o.sft_coef = coef;
  o.sft_batch = 5;  // every example in every update
  o.sft_examples = Examples();
  return o;
}

// d/dw of the examples' token-mean NLL, and that mean, from full logits on a copy of `m`.
struct Reference {
  model::NamedTensors grads;
  double nll = 0;
};
Reference NllGradient(const model::Transformer& m, const std::vector<Sample>& examples) {
  model::Transformer copy = m.Clone().value();
  double tokens = 0;
  at::Tensor total = at::zeros({}, at::kDouble);
  for (const Sample& s : examples) {
    std::vector<int64_t> ids = s.prompt_ids;
    ids.insert(ids.end(), s.response_ids.begin(), s.response_ids.end());
    at::Tensor logits = copy.Forward(at::tensor(ids, at::kLong).unsqueeze(0)).value()[0];
    at::Tensor lp = at::log_softmax(logits.to(at::kDouble), -1);
    for (size_t j = 0; j < s.response_ids.size(); ++j) {
      if (!s.loss_mask.empty() && s.loss_mask[j] == 0) continue;
      const int64_t p = static_cast<int64_t>(s.prompt_ids.size() + j);  // predicted from position p - 1
      total = total - lp[p - 1][ids[static_cast<size_t>(p)]];
      tokens += 1;
    }
  }
  at::Tensor mean = total / tokens;
  mean.backward();
  Reference r;
  r.nll = mean.item<double>();
  for (auto& [name, p] : copy.NamedParameters()) r.grads.emplace_back(name, p.grad().clone());
  return r;
}

model::NamedTensors OneStep(const GrpoOptions& o, StepStats* stats) {
  auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, o).value();
  t->BeginStep();
  EXPECT_TRUE(t->Accumulate(Batch(3)).ok());
  auto s = t->FinishStep();
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (s.ok()) *stats = *s;
  return t->policy().NamedParameters();
}

TEST(GrpoSftMixTest, TheMixAddsItsWeightedNllGradientToTheUpdate) {
  at::set_num_threads(1);
  const double coef = 0.5, lr = 1e-2;
  const model::Transformer start = model::Transformer::Create(Tiny(), 7).value();
  const model::NamedTensors w0 = start.NamedParameters();
  const Reference ref = NllGradient(start, *Examples());
  for (LossNorm norm : {LossNorm::kToken, LossNorm::kSequence, LossNorm::kSequenceSumNorm}) {
    SCOPED_TRACE(static_cast<int>(norm));
    StepStats plain_stats, mixed_stats;
    const model::NamedTensors plain = OneStep(MixOptions(norm, 0), &plain_stats);
    const model::NamedTensors mixed = OneStep(MixOptions(norm, coef), &mixed_stats);
    EXPECT_EQ(plain_stats.sft_loss, 0);
    EXPECT_NEAR(mixed_stats.sft_loss, ref.nll, 1e-5);
    EXPECT_NEAR(mixed_stats.loss, plain_stats.loss, 1e-6);  // the policy loss is reported alone
    double moved_by_mix = 0;
    for (size_t i = 0; i < w0.size(); ++i) {
      // The policy loss's gradient, from the plain update u = lr g / (|g| + 1).
      at::Tensor u = (w0[i].second - plain[i].second).to(at::kDouble);
      at::Tensor g = u / (lr - u.abs());
      at::Tensor want_g = g + coef * ref.grads[i].second.to(at::kDouble);
      at::Tensor want = w0[i].second.to(at::kDouble) - lr * want_g / (want_g.abs() + 1);
      EXPECT_TRUE(at::allclose(mixed[i].second.to(at::kDouble), want, 0, 1e-6))
          << w0[i].first << " differs by " << (mixed[i].second.to(at::kDouble) - want).abs().max().item<double>();
      moved_by_mix = std::max(moved_by_mix, (mixed[i].second - plain[i].second).abs().max().item<double>());
    }
    EXPECT_GT(moved_by_mix, 1e-4);  // far above the 1e-6 checked
  }
}

// Two examples per update out of five: updates 0, 1, 2 take positions 0-1, 2-3 and 4 then 0 of
// the second pass. A trainer resumed after one step (its optimizer's state and step count back)
// must take positions 2-3 next, as the one that went on did, not start over.
TEST(GrpoSftMixTest, AResumedTrainerMixesTheExamplesItsRunWouldHave) {
  at::set_num_threads(1);
  GrpoOptions o = MixOptions(LossNorm::kToken, 1.0);
  o.sft_batch = 2;
  o.grad_clip = 1.0;
  auto step = [](GrpoTrainer* t, uint64_t seed) {
    t->BeginStep();
    ASSERT_TRUE(t->Accumulate(Batch(seed)).ok());
    auto s = t->FinishStep();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    EXPECT_GT(s->sft_loss, 0);
  };
  auto straight = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, o).value();
  for (uint64_t s = 1; s <= 3; ++s) step(straight.get(), s);
  auto first = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, o).value();
  step(first.get(), 1);
  auto resumed = GrpoTrainer::Create(first->policy().Clone().value(), std::nullopt, o).value();
  ASSERT_TRUE(resumed->optimizer().LoadState(first->optimizer().State(), first->optimizer().steps()).ok());
  for (uint64_t s = 2; s <= 3; ++s) step(resumed.get(), s);
  // The same, with another seed of the shuffle: the examples mixed in do change the weights.
  GrpoOptions reseeded = o;
  reseeded.seed = 99;
  auto other = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, reseeded).value();
  for (uint64_t s = 1; s <= 3; ++s) step(other.get(), s);
  const model::NamedTensors a = straight->policy().NamedParameters(), b = resumed->policy().NamedParameters(),
                            c = other->policy().NamedParameters();
  double apart = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::allclose(a[i].second, b[i].second, 0, 1e-6)) << a[i].first;
    apart = std::max(apart, (a[i].second - c[i].second).abs().max().item<double>());
  }
  EXPECT_GT(apart, 1e-4);
}

TEST(GrpoSftMixTest, BadMixOptionsAreRefused) {
  auto refused = [](GrpoOptions o) {
    return GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, o).status();
  };
  GrpoOptions o = MixOptions(LossNorm::kToken, -0.1);
  EXPECT_EQ(ValidateGrpoOptions(o).code(), Code::kInvalidArgument);
  o = MixOptions(LossNorm::kToken, 0.1);
  o.sft_batch = 0;
  EXPECT_EQ(ValidateGrpoOptions(o).code(), Code::kInvalidArgument);
  o = MixOptions(LossNorm::kToken, 0.1);
  o.sft_examples.reset();
  Status s = refused(o);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--sft-data"), std::string::npos) << s.message();
  o.sft_examples = std::make_shared<const std::vector<Sample>>();
  EXPECT_EQ(refused(o).code(), Code::kInvalidArgument);
  o.sft_coef = 0;  // off: no examples needed
  EXPECT_TRUE(refused(o).ok());
}

}  // namespace
}  // namespace rl::train
