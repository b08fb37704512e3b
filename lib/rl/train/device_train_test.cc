// The learning roles on a GPU against the same work on the CPU: forward passes, cached decoding
// (a dense model and a Qwen3-MoE),
// the sampler, streaming generation, a GRPO step in float32 (with and without an SFT mix) and in bf16 with masters, and the host snapshots a
// checkpoint and a weight publisher take. Every test skips where no CUDA device is visible (this
// build, or a machine without a GPU); scripts/gpu-check.sh runs them on one.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>

#include "rl/dist/test_ranks.h"
#include "rl/model/device.h"
#include "rl/model/generate.h"
#include "rl/model/kv_cache.h"
#include "rl/model/sampler.h"
#include "rl/train/checkpoint.h"
#include "rl/train/grpo_test_util.h"

namespace rl::train {
namespace {

using grpo_fixture::Batch;
using grpo_fixture::Tiny;

const c10::Device kGpu(c10::kCUDA, 0);
const c10::Device kCpu(c10::kCPU);

#define REQUIRE_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device"

model::Transformer Model(uint64_t seed, const c10::Device& device) {
  model::Transformer m = model::Transformer::Create(Tiny(), seed).value();
  EXPECT_TRUE(m.To(device).ok());
  return m;
}

// Forward passes and cached decoding of `config` on the GPU against the CPU, from the same weights
// (`randomize`: N(0, 0.3) draws, so that a router's choices are clear-cut rather than near ties
// that rounding could flip between the devices).
void ExpectTheGpuComputesAsTheCpu(const model::ModelConfig& config, bool randomize) {
  model::Transformer cpu = model::Transformer::Create(config, 3).value();
  if (randomize) model::testing::RandomizeWeights(&cpu, 5);
  model::Transformer gpu = cpu.Clone(kGpu).value();
  EXPECT_TRUE(gpu.device().is_cuda());
  const at::Tensor tokens = at::randint(0, config.vocab_size, {3, 9}, at::kLong);
  const at::Tensor want = cpu.Forward(tokens).value();
  const at::Tensor got = gpu.Forward(tokens).value();
  EXPECT_TRUE(got.is_cuda());
  const double scale = std::max(1.0, want.abs().max().item<double>());  // random weights: logits ~10
  const double tol = 1e-4 * scale;
  EXPECT_LT((got.cpu() - want).abs().max().item<double>(), tol);
  // Cached: a prefill of 5 then single tokens, logits as the full forward's.
  auto cache = model::KvCache::Create(gpu.config(), 3, gpu.dtype(), 1, gpu.device());
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();
  auto first = gpu.ForwardStep(tokens.narrow(1, 0, 5), {0, 1, 2}, &*cache);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_LT((first->cpu() - want.narrow(1, 0, 5)).abs().max().item<double>(), tol);
  for (int64_t t = 5; t < 9; ++t) {
    auto step = gpu.ForwardStep(tokens.narrow(1, t, 1), {0, 1, 2}, &*cache);
    ASSERT_TRUE(step.ok()) << step.status().ToString();
    EXPECT_LT((step->cpu() - want.narrow(1, t, 1)).abs().max().item<double>(), tol) << t;
  }
  // A host snapshot (what a checkpoint writes) holds the same weights.
  auto host = gpu.Clone(kCpu);
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->device().is_cpu());
  EXPECT_LT((host->Forward(tokens).value() - want).abs().max().item<double>(), 1e-6 * scale);
}

TEST(DeviceTrainTest, ForwardAndCachedDecodeOnTheGpuMatchTheCpu) {
  REQUIRE_GPU();
  ExpectTheGpuComputesAsTheCpu(Tiny(), false);
}

// Qwen3-MoE's sparse layers sort the tokens by expert and gather them on the device.
TEST(DeviceTrainTest, AQwen3MoeOnTheGpuComputesAsOnTheCpu) {
  REQUIRE_GPU();
  ExpectTheGpuComputesAsTheCpu(model::testing::TinyConfig(model::Architecture::kQwen3Moe), true);
}

TEST(DeviceTrainTest, SamplingOnTheGpuPicksAsOnTheCpuWithTheSameSeed) {
  REQUIRE_GPU();
  at::manual_seed(5);
  const at::Tensor logits = at::randn({64, 50}) * 2;
  auto a = model::Sampler::Create({}, 9), b = model::Sampler::Create({}, 9);
  auto on_cpu = a->Draw(logits), on_gpu = b->Draw(logits.to(kGpu));
  ASSERT_TRUE(on_cpu.ok() && on_gpu.ok());
  EXPECT_TRUE(on_gpu->ids.is_cpu() && on_gpu->logprobs.is_cpu()) << "picks come back to the host";
  // The same uniforms; the cumulative sums may round differently at a boundary.
  EXPECT_GE((on_cpu->ids == on_gpu->ids).sum().item<int64_t>(), 62);
  const at::Tensor same = on_cpu->ids == on_gpu->ids;
  EXPECT_LT((on_cpu->logprobs - on_gpu->logprobs).abs().masked_select(same).max().item<double>(), 1e-4);
}

TEST(DeviceTrainTest, GenerationRunsOnTheGpu) {
  REQUIRE_GPU();
  model::Transformer gpu = Model(4, kGpu);
  model::GenerateOptions o;
  o.max_new_tokens = 6;
  o.slots = 4;
  o.sampling.temperature = 0;
  std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4, 5}, {6}, {7, 8, 9, 10}, {11}};
  auto on_gpu = model::Generate(gpu, prompts, o);
  auto on_cpu = model::Generate(Model(4, kCpu), prompts, o);
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().ToString();
  ASSERT_TRUE(on_cpu.ok());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ((*on_gpu)[i].response_ids, (*on_cpu)[i].response_ids) << i;
}

// rl-rollout --refill's streaming call on the GPU: prompts added as slots free decode as the
// CPU's whole call does.
TEST(DeviceTrainTest, StreamingGenerationOnTheGpuMatchesTheCpu) {
  REQUIRE_GPU();
  model::Transformer gpu = Model(4, kGpu);
  model::GenerateOptions o;
  o.max_new_tokens = 6;
  o.slots = 2;
  o.sampling.temperature = 0;
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4, 5}, {6}, {7, 8, 9, 10}, {11}};
  auto on_cpu = model::Generate(Model(4, kCpu), prompts, o);
  size_t next = 1;
  o.more_prompts = [&](int64_t) -> Result<std::vector<std::vector<int64_t>>> {
    if (next == prompts.size()) return std::vector<std::vector<int64_t>>();
    return std::vector<std::vector<int64_t>>{prompts[next++]};
  };
  auto streamed = model::Generate(gpu, {prompts[0]}, o);
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  ASSERT_TRUE(on_cpu.ok());
  ASSERT_EQ(streamed->size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ((*streamed)[i].response_ids, (*on_cpu)[i].response_ids) << i;
}

// One GRPO step on each device from the same weights and batch: the same loss and gradient norm,
// and the weights after it agree. In bf16 the masters live on the GPU and the state comes back
// to the host in float32.
TEST(DeviceTrainTest, AGrpoStepOnTheGpuIsTheCpuStep) {
  REQUIRE_GPU();
  auto examples = std::make_shared<std::vector<Sample>>();  // an SFT mix's
  for (const Group& g : Batch(23)) examples->insert(examples->end(), g.samples.begin(), g.samples.end());
  for (int variant = 0; variant < 3; ++variant) {
    const bool bf16 = variant == 1, sft = variant == 2;
    SCOPED_TRACE(bf16 ? "bf16" : sft ? "float32 with an SFT mix" : "float32");
    std::vector<StepStats> stats;
    std::vector<model::NamedTensors> weights;
    for (const c10::Device& d : {kCpu, kGpu}) {
      GrpoOptions o;
      o.schedule.lr = 1e-2;
      o.device = d;
      o.bf16 = bf16;
      if (sft) {
        o.sft_coef = 0.5;
        o.sft_batch = 5;
        o.sft_examples = examples;
      }
      auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, o);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      EXPECT_EQ((*t)->policy().device(), d);
      (*t)->BeginStep();
      ASSERT_TRUE((*t)->Accumulate(Batch(1)).ok());
      auto s = (*t)->FinishStep();
      ASSERT_TRUE(s.ok()) << s.status().ToString();
      stats.push_back(*s);
      const model::NamedTensors state = (*t)->optimizer().State();
      for (const auto& [name, x] : state) {
        EXPECT_TRUE(x.is_cpu()) << name;
        EXPECT_EQ(x.scalar_type(), at::kFloat) << name;
      }
      model::NamedTensors w;
      for (const auto& [name, x] : (*t)->optimizer().Weights()) w.emplace_back(name, x.detach().cpu());
      weights.push_back(std::move(w));
    }
    const double tol = bf16 ? 2e-2 : 1e-4;
    EXPECT_NEAR(stats[1].loss, stats[0].loss, tol * std::max(1.0, std::abs(stats[0].loss)));
    EXPECT_NEAR(stats[1].grad_norm, stats[0].grad_norm, 5 * tol * stats[0].grad_norm);
    EXPECT_NEAR(stats[1].sft_loss, stats[0].sft_loss, tol * std::max(1.0, stats[0].sft_loss));
    if (sft) { EXPECT_GT(stats[0].sft_loss, 0); }
    int64_t close = 0, total = 0;
    for (size_t i = 0; i < weights[0].size(); ++i) {
      const at::Tensor diff = (weights[1][i].second - weights[0][i].second).abs();
      close += (diff < 1e-3).sum().item<int64_t>();
      total += diff.numel();
    }
    EXPECT_GT(static_cast<double>(close) / static_cast<double>(total), 0.9) << close << " of " << total;
  }
}

// Two data-parallel ranks on GPUs (their own where there are two, through NCCL where built; one
// shared otherwise, through host memory) end a step with the weights one rank on the CPU gets from
// the whole batch, and with the same bits on both ranks.
TEST(DeviceTrainTest, DataParallelRanksOnGpusTakeTheWholeBatchsStep) {
  REQUIRE_GPU();
  const int gpus = static_cast<int>(torch::cuda::device_count());
  const std::vector<Group> batch = Batch(4);
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  auto one = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, o).value();
  one->BeginStep();
  ASSERT_TRUE(one->Accumulate(batch).ok());
  ASSERT_TRUE(one->FinishStep().ok());
  std::vector<model::NamedTensors> got(2);
  dist::testing::RunRanks(2, [&](dist::Group& g) {
    GrpoOptions mine = o;
    mine.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(g.rank() % gpus));
    auto t = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 7).value(), std::nullopt, mine).value();
    ASSERT_TRUE(t->SetGroup(&g).ok());
    t->BeginStep();
    // Uneven: one group against two.
    std::vector<Group> part(batch.begin() + (g.rank() == 0 ? 0 : 1), g.rank() == 0 ? batch.begin() + 1 : batch.end());
    ASSERT_TRUE(t->Accumulate(part).ok());
    auto s = t->FinishStep();
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    for (const auto& [name, x] : t->policy().NamedParameters()) got[g.rank()].emplace_back(name, x.detach().cpu());
  }, [gpus](int rank) { return rank % gpus; });
  const model::NamedTensors want = one->policy().NamedParameters();
  ASSERT_EQ(got[0].size(), want.size());
  ASSERT_EQ(got[1].size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(at::allclose(got[0][i].second, want[i].second, 1e-4, 1e-5)) << want[i].first;
    EXPECT_TRUE(at::equal(got[0][i].second, got[1][i].second)) << want[i].first;
  }
}

// A bf16 trainer on the GPU checkpointed from host snapshots (pinned) resumes on the GPU with the
// step it would have taken, bit for bit, as on the CPU (grpo_test.cc).
TEST(DeviceTrainTest, ACheckpointOfAGpuRunResumesBitForBit) {
  REQUIRE_GPU();
  GrpoOptions o;
  o.schedule.lr = 1e-2;
  o.device = kGpu;
  o.bf16 = true;
  auto straight = GrpoTrainer::Create(model::Transformer::Create(Tiny(), 5).value(), std::nullopt, o).value();
  auto step = [](GrpoTrainer* t, uint64_t seed) {
    t->BeginStep();
    ASSERT_TRUE(t->Accumulate(Batch(seed)).ok());
    ASSERT_TRUE(t->FinishStep().ok());
  };
  step(straight.get(), 1);
  Checkpoint c;
  c.model = straight->policy().Clone(kCpu).value();
  for (const auto& [name, t] : c.model->NamedParameters()) EXPECT_TRUE(t.is_pinned()) << name;
  c.adam = straight->optimizer().State();
  c.adam_steps = straight->optimizer().steps();
  auto bytes = EncodeCheckpoint(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  step(straight.get(), 2);
  auto back = DecodeCheckpoint(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  auto resumed = GrpoTrainer::Create(*back->model, std::nullopt, o).value();
  ASSERT_TRUE(resumed->optimizer().LoadState(back->adam, back->adam_steps).ok());
  step(resumed.get(), 2);
  const auto a = resumed->optimizer().Weights(), b = straight->optimizer().Weights();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(a[i].second.equal(b[i].second)) << a[i].first;
}

TEST(DeviceTrainTest, HostCopiesArePinnedAndPeaksAreCounted) {
  REQUIRE_GPU();
  model::ResetPeakDeviceBytes(kGpu);
  const at::Tensor x = at::ones({1 << 20}, at::TensorOptions().device(kGpu));
  const at::Tensor host = model::HostCopy(x);
  EXPECT_TRUE(host.is_cpu());
  EXPECT_TRUE(host.is_pinned());
  EXPECT_EQ(host.sum().item<double>(), 1 << 20);
  const std::optional<int64_t> peak = model::PeakDeviceBytes(kGpu);
  ASSERT_TRUE(peak.has_value()) << "a CUDA build reads the caching allocator";
  EXPECT_GE(*peak, int64_t{4} << 20);
}

}  // namespace
}  // namespace rl::train
