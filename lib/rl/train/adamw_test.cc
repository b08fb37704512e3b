// AdamW's float32 masters for 16-bit parameters (adamw.h), against the arithmetic they exist for:
// an update far below a bfloat16 weight's resolution.
#include "rl/train/adamw.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "rl/train/grpo_test_util.h"

namespace rl::train {
namespace {

using grpo_fixture::Batch;
using grpo_fixture::Tiny;

// One parameter of ones with a constant gradient, `steps` updates at lr 1e-4: Adam moves a weight
// by about lr per step, and bfloat16 has 2^-8 (0.0039) between 1 and the next number below it.
struct Descent {
  at::Tensor p;
  std::unique_ptr<AdamW> opt;
};
Descent Descend(at::ScalarType dtype, int steps) {
  Descent d{at::ones({4}, dtype).requires_grad_(true), nullptr};
  d.opt = std::make_unique<AdamW>(model::NamedTensors{{"w", d.p}}, AdamWOptions{});
  for (int i = 0; i < steps; ++i) {
    d.p.mutable_grad() = at::full({4}, 0.5, dtype);
    EXPECT_TRUE(d.opt->Step(1e-4).ok());
  }
  return d;
}

double Master(const Descent& d) { return d.opt->Weights().front().second[0].item<double>(); }

TEST(AdamWTest, Bfloat16WeightsMoveThroughTheirFloat32Masters) {
  const Descent ten = Descend(at::kBFloat16, 10);
  ASSERT_TRUE(ten.opt->mixed());
  EXPECT_EQ(ten.opt->Weights().front().second.scalar_type(), at::kFloat);
  EXPECT_NEAR(Master(ten), 1 - 10 * 1e-4, 1e-5) << "the masters hold every small step";
  EXPECT_EQ(ten.p[0].item<float>(), 1.0f) << "0.999 rounds to 1 in bfloat16";
  const Descent sixty = Descend(at::kBFloat16, 60);
  EXPECT_NEAR(Master(sixty), 1 - 60 * 1e-4, 1e-5);
  EXPECT_EQ(sixty.p[0].item<float>(), at::tensor({1 - 60 * 1e-4}, at::kFloat).to(at::kBFloat16).item<float>())
      << "the weight is its master rounded";
  EXPECT_LT(sixty.p[0].item<float>(), 1.0f);
  // Without masters the same steps vanish: bfloat16 arithmetic rounds 1 - 1e-4 back to 1.
  at::Tensor plain = at::ones({4}, at::kBFloat16);
  for (int i = 0; i < 60; ++i) plain.sub_(1e-4);
  EXPECT_EQ(plain[0].item<float>(), 1.0f);
  const Descent f32 = Descend(at::kFloat, 10);
  EXPECT_FALSE(f32.opt->mixed()) << "float32 needs no masters";
  EXPECT_NEAR(f32.p[0].item<double>(), 1 - 10 * 1e-4, 1e-5);
}

TEST(AdamWTest, MastersStartFromTheGivenFloat32WeightsAndGoIntoTheState) {
  const at::Tensor exact = at::full({3}, 1.001, at::kFloat);
  at::Tensor p = exact.to(at::kBFloat16).requires_grad_(true);
  AdamW opt({{"w", p}}, AdamWOptions{}, {{"w", exact}});
  EXPECT_TRUE(opt.Weights().front().second.equal(exact)) << "not the bfloat16 rounding of 1.001";
  p.mutable_grad() = at::ones({3}, at::kBFloat16);
  ASSERT_TRUE(opt.Step(1e-3).ok());
  const model::NamedTensors state = opt.State();
  ASSERT_EQ(state.size(), 3u);
  for (const auto& [name, t] : state) {
    EXPECT_EQ(t.scalar_type(), at::kFloat) << name;
    EXPECT_TRUE(t.is_cpu()) << name;
  }
  // Back into a fresh optimizer (from the rounded weights): the masters come back exactly.
  at::Tensor q = at::ones({3}, at::kBFloat16).requires_grad_(true);
  AdamW resumed({{"w", q}}, AdamWOptions{});
  ASSERT_TRUE(resumed.LoadState(state, opt.steps()).ok());
  EXPECT_TRUE(resumed.Weights().front().second.equal(opt.Weights().front().second));
  EXPECT_TRUE(q.equal(p)) << "the parameters take the masters, rounded";
  // A state without masters (pure 16-bit training before masters) still loads: masters from q.
  model::NamedTensors old(state.begin(), state.begin() + 2);
  AdamW from_old({{"w", q}}, AdamWOptions{});
  EXPECT_TRUE(from_old.LoadState(old, 1).ok());
  EXPECT_TRUE(from_old.Weights().front().second.equal(q.to(at::kFloat)));
  // A float32 run resumed from a state with masters takes them as its weights.
  at::Tensor f = at::zeros({3}, at::kFloat).requires_grad_(true);
  AdamW f32({{"w", f}}, AdamWOptions{});
  ASSERT_TRUE(f32.LoadState(state, 1).ok());
  EXPECT_TRUE(f.equal(opt.Weights().front().second));
  EXPECT_EQ(f32.LoadState({state[0], state[2]}, 1).code(), Code::kDataError) << "v is not optional";
}

// A GRPO step in bf16 (GrpoOptions::bf16) from float32 weights: the policy computes in bfloat16,
// the masters start from the float32 weights, and the step's loss is the float32 step's to
// bfloat16's precision.
TEST(AdamWTest, Bf16GrpoStepTracksTheFloat32Step) {
  at::set_num_threads(1);
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  auto run = [&](bool bf16) {
    GrpoOptions go = o;
    go.bf16 = bf16;
    model::Transformer m = model::Transformer::Create(Tiny(), 7).value();
    const model::NamedTensors start = m.Clone().value().NamedParameters();
    auto t = GrpoTrainer::Create(m, std::nullopt, go);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ((*t)->policy().dtype(), bf16 ? model::DType::kBF16 : model::DType::kF32);
    if (bf16) {
      const auto masters = (*t)->optimizer().Weights();
      for (size_t i = 0; i < masters.size(); ++i) EXPECT_TRUE(masters[i].second.equal(start[i].second)) << start[i].first;
    }
    (*t)->BeginStep();
    EXPECT_TRUE((*t)->Accumulate(Batch(1)).ok());
    auto stats = (*t)->FinishStep();
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    return std::make_pair(stats.value(), (*t)->optimizer().Weights());
  };
  const auto [f32, f32_weights] = run(false);
  const auto [b16, b16_weights] = run(true);
  EXPECT_NEAR(b16.loss, f32.loss, 0.02 * std::abs(f32.loss) + 1e-3);
  EXPECT_NEAR(b16.grad_norm, f32.grad_norm, 0.05 * f32.grad_norm);
  EXPECT_NEAR(b16.logprob_gap, f32.logprob_gap, 0.02 + 0.05 * f32.logprob_gap);
  // Both runs start from the same float32 weights and Adam's first step moves each by about lr:
  // the masters may differ by 2 lr where a gradient's sign flipped in bfloat16, and mostly agree.
  int64_t close = 0, total = 0;
  for (size_t i = 0; i < f32_weights.size(); ++i) {
    const at::Tensor diff = (b16_weights[i].second - f32_weights[i].second).abs();
    EXPECT_LE(diff.max().item<double>(), 2.05 * o.schedule.lr) << f32_weights[i].first;
    close += (diff < 0.1 * o.schedule.lr).sum().item<int64_t>();
    total += diff.numel();
  }
  EXPECT_GT(static_cast<double>(close) / static_cast<double>(total), 0.9) << close << " of " << total;
}

}  // namespace
}  // namespace rl::train
