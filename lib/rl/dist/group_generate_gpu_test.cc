// Rollout groups on GPUs: every rank's model on a GPU (all on GPU 0 where there is one, sharing it
// through host memory; a GPU each where there are two, through NCCL where the build has it),
// generating what the leader's model generates alone on its GPU: statically split over both
// ranks, and adaptively, merging two replicas into one with their KV caches moved or recomputed,
// and splitting it back for prompts a refill adds.
// Every test skips where no CUDA device is visible; scripts/gpu-check.sh runs them on a GPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "rl/dist/adaptive_generate.h"
#include "rl/dist/group_generate.h"
#include "rl/dist/nccl_comm.h"
#include "rl/dist/test_ranks.h"
#include "rl/model/test_util.h"

namespace rl::dist {
namespace {

using model::Transformer;
using testing::RunRanks;

int GpuOf(int rank) { return rank % testing::VisibleGpus(); }
c10::Device Gpu(int index) { return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index)); }

// A tiny model with random weights (seed), in float32 on GPU 0 unless dtype says otherwise.
Transformer OnGpu(const model::ModelConfig& config, uint64_t seed, model::DType dtype = model::DType::kF32) {
  auto m = Transformer::Create(config, seed);
  EXPECT_TRUE(m.ok());
  model::testing::RandomizeWeights(&*m, seed, 0.5);
  EXPECT_TRUE(m->ToDType(dtype).ok());
  EXPECT_TRUE(m->To(Gpu(0)).ok());
  return *m;
}

TEST(GroupGpuTest, ARolloutGroupOnGpusGeneratesWhatTheLeadersModelDoes) {
  RL_REQUIRE_GPUS(1);
  model::ModelConfig config = model::testing::TinyConfig(model::Architecture::kQwen3, true, 2);
  config.max_position_embeddings = 48;
  const Transformer v1 = OnGpu(config, 1), v2 = OnGpu(config, 2, model::DType::kBF16);
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4}, {5, 6}, {7, 8, 9, 10}, {11}};
  model::GenerateOptions go;
  go.sampling.temperature = 0;
  go.max_new_tokens = 20;
  go.slots = 4;
  go.eos_id = 0;
  auto want1 = model::Generate(v1, prompts, go), want2 = model::Generate(v2, prompts, go);
  ASSERT_TRUE(want1.ok() && want2.ok());
  Status follower_status = Status::Internal("not run");
  RunRanks(2, [&](Group& g) {
    EXPECT_EQ(g.OnNccl(), NcclComm::Built() && testing::VisibleGpus() >= 2) << "rank " << g.rank();
    if (g.rank() == 1) {
      auto start = Transformer::Create(config, 99);  // float32 on its GPU; its weights come from the leader
      ASSERT_TRUE(start.ok() && start->To(Gpu(GpuOf(1))).ok());
      follower_status = RunGroupFollower(g, *start, {});
      return;
    }
    GroupLeader leader(&g, {});
    for (int round = 0; round < 3; ++round) {  // v1, v1 again (no weights sent), v2 in bfloat16
      const auto& want = round < 2 ? *want1 : *want2;
      auto got = leader.Generate(round < 2 ? v1 : v2, round < 2 ? 1 : 2, prompts, go, nullptr);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      size_t first_agree = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        const auto& ids = (*got)[i].response_ids;
        ASSERT_EQ((*got)[i].logprobs.size(), ids.size());
        ASSERT_FALSE(ids.empty());
        if (round < 2) {  // float32: the split sums round alike, token for token
          EXPECT_EQ(ids, want[i].response_ids) << "round " << round << " prompt " << i;
          EXPECT_EQ((*got)[i].stop, want[i].stop);
        }
        first_agree += ids[0] == want[i].response_ids[0];
      }
      // bfloat16 rounds each rank's partial sum before the sum: a near tie may flip a pick, even
      // the first (a prefill's); the weights still came and were used if nearly all agree.
      EXPECT_GE(first_agree, prompts.size() - (round < 2 ? 0 : 1)) << "round " << round;
    }
    EXPECT_TRUE(leader.Stop().ok());
  }, GpuOf);
  EXPECT_TRUE(follower_status.ok()) << follower_status.ToString();
}

TEST(GroupGpuTest, AnAdaptiveGroupMovesItsSequencesOnTheGpu) {
  RL_REQUIRE_GPUS(1);
  model::ModelConfig config = model::testing::TinyConfig(model::Architecture::kLlama, true, 2);
  config.max_position_embeddings = 64;
  const Transformer whole = OnGpu(config, 3);
  std::vector<std::vector<int64_t>> prompts;
  for (int64_t i = 0; i < 8; ++i) prompts.push_back({1 + i, 2 + i, 3});
  AdaptiveOptions o;
  o.generate.sampling.temperature = 0;
  o.generate.slots = 3;
  o.generate.max_new_tokens_each = {30, 2, 3, 24, 2, 5, 3, 2};  // a long tail
  o.check_every = 2;
  o.start_tp = 1;
  o.adaptive = true;
  o.force_switch_check = 0;  // merge at the first check with nothing pending
  auto want = model::Generate(whole, prompts, o.generate);
  ASSERT_TRUE(want.ok());
  for (auto move : {AdaptiveOptions::Move::kMigrate, AdaptiveOptions::Move::kRecompute}) {
    o.move = move;
    const char* what = move == AdaptiveOptions::Move::kMigrate ? "migrated" : "recomputed";
    std::vector<AdaptiveResult> results(2);
    RunRanks(2, [&](Group& g) {
      auto mine = g.rank() == 0 ? Result<Transformer>(whole) : whole.Clone(Gpu(GpuOf(g.rank())));
      ASSERT_TRUE(mine.ok());
      auto r = AdaptiveGenerate(g, *mine, prompts, o);
      ASSERT_TRUE(r.ok()) << what << ": " << r.status().ToString();
      results[static_cast<size_t>(g.rank())] = std::move(*r);
    }, GpuOf);
    for (size_t r = 0; r < results.size(); ++r) {
      ASSERT_EQ(results[r].generations.size(), prompts.size()) << what;
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(results[r].generations[i].response_ids, (*want)[i].response_ids) << what << " rank " << r << " prompt " << i;
      }
    }
    ASSERT_EQ(results[0].switches.size(), 1u) << what;
    EXPECT_GT(results[0].switches[0].sequences, 0) << what;
    EXPECT_EQ(results[1].trace.back().tp, 2) << what;
  }
}

// Refill on GPUs: prompts added at the checks split the merged replica back (its KV cache
// gathered onto each new replica's GPU), and the tokens are those of one generation of them all.
TEST(GroupGpuTest, ARefillingAdaptiveGroupSplitsOnTheGpu) {
  RL_REQUIRE_GPUS(1);
  model::ModelConfig config = model::testing::TinyConfig(model::Architecture::kLlama, true, 2);
  config.max_position_embeddings = 64;
  const Transformer whole = OnGpu(config, 4);
  std::vector<std::vector<int64_t>> start, extra, all;
  for (int64_t i = 0; i < 10; ++i) (i < 4 ? start : extra).push_back({1 + i, 3, 2 + i});
  all = start;
  all.insert(all.end(), extra.begin(), extra.end());
  AdaptiveOptions o;
  o.generate.sampling.temperature = 0;
  o.generate.slots = 3;
  o.generate.max_new_tokens = 12;
  o.check_every = 2;
  o.force_switch_check = 0;  // merge whenever nothing is pending and no prompt came
  o.refill = true;
  auto want = model::Generate(whole, all, o.generate);
  ASSERT_TRUE(want.ok());
  std::vector<AdaptiveResult> results(2);
  RunRanks(2, [&](Group& g) {
    auto mine = g.rank() == 0 ? Result<Transformer>(whole) : whole.Clone(Gpu(GpuOf(g.rank())));
    ASSERT_TRUE(mine.ok());
    AdaptiveOptions ro = o;
    size_t given = 0;
    int calls = 0;
    if (g.rank() == 0) {  // nothing at the first check (the stage merges), then three at a time
      ro.generate.more_prompts = [&](int64_t) -> Result<std::vector<std::vector<int64_t>>> {
        if (calls++ == 0 || given == extra.size()) return std::vector<std::vector<int64_t>>();
        const size_t n = std::min<size_t>(3, extra.size() - given);
        std::vector<std::vector<int64_t>> out(extra.begin() + static_cast<std::ptrdiff_t>(given),
                                              extra.begin() + static_cast<std::ptrdiff_t>(given + n));
        given += n;
        return out;
      };
    }
    auto r = AdaptiveGenerate(g, *mine, start, ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    results[static_cast<size_t>(g.rank())] = std::move(*r);
  }, GpuOf);
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].generations.size(), all.size());
    for (size_t i = 0; i < all.size(); ++i) {
      EXPECT_EQ(results[r].generations[i].response_ids, (*want)[i].response_ids) << "rank " << r << " prompt " << i;
    }
  }
  int split = 0;
  for (const SwitchRecord& s : results[0].switches) split += s.from == 2 && s.to == 1;
  EXPECT_GE(split, 1);
}

}  // namespace
}  // namespace rl::dist
