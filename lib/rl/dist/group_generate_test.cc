// A rollout group against model::Generate: the leader's requests (prompts, options, weights) reach
// the follower, and the group's responses are the whole model's.
#include "rl/dist/group_generate.h"

#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "rl/dist/test_ranks.h"
#include "rl/model/test_util.h"

namespace rl::dist {
namespace {

using model::Transformer;
using testing::RunRanks;

TEST(GroupGenerateTest, TheGroupGeneratesWhatTheLeadersModelDoesAcrossWeightVersions) {
  model::ModelConfig config = model::testing::TinyConfig(model::Architecture::kQwen3, true, 2);
  config.max_position_embeddings = 48;
  auto v1 = Transformer::Create(config, 1), v2 = Transformer::Create(config, 2);
  ASSERT_TRUE(v1.ok() && v2.ok());
  model::testing::RandomizeWeights(&*v1, 1, 0.5);
  model::testing::RandomizeWeights(&*v2, 2, 0.5);
  const std::vector<std::vector<int64_t>> prompts = {{1, 2, 3}, {4}, {5, 6}, {7, 8, 9, 10}, {11}};
  model::GenerateOptions go;
  go.sampling.temperature = 0;
  go.max_new_tokens = 20;
  go.slots = 4;
  go.stop_ids = {3};
  go.eos_id = 0;
  auto want1 = model::Generate(*v1, prompts, go), want2 = model::Generate(*v2, prompts, go);
  ASSERT_TRUE(want1.ok() && want2.ok());
  {
    Status follower_status = Status::Internal("not run");
    RunRanks(2, [&](Group& g) {
      GroupGenerateOptions opts;  // static tensor parallelism over both ranks
      if (g.rank() == 1) {
        auto seed_model = Transformer::Create(config, 99);  // its weights come from the leader
        ASSERT_TRUE(seed_model.ok());
        follower_status = RunGroupFollower(g, *seed_model, opts);
        return;
      }
      GroupLeader leader(&g, opts);
      for (int round = 0; round < 3; ++round) {  // v1, v1 again (no weights sent), v2
        const Transformer& m = round < 2 ? *v1 : *v2;
        const auto& want = round < 2 ? *want1 : *want2;
        model::GenerateStats stats;
        auto got = leader.Generate(m, round < 2 ? 1 : 2, prompts, go, &stats);
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        int64_t tokens = 0;
        for (size_t i = 0; i < prompts.size(); ++i) {
          EXPECT_EQ((*got)[i].response_ids, want[i].response_ids) << "round " << round << " prompt " << i;
          EXPECT_EQ((*got)[i].stop, want[i].stop);
          tokens += static_cast<int64_t>(want[i].response_ids.size());
        }
        EXPECT_EQ(stats.new_tokens, tokens);
      }
      EXPECT_TRUE(leader.Stop().ok());
    });
    EXPECT_TRUE(follower_status.ok()) << follower_status.ToString();
  }
}

TEST(GroupGenerateTest, AFollowerTakesTheLeadersDtype) {
  model::ModelConfig config = model::testing::TinyConfig(model::Architecture::kLlama, true, 2);
  auto bf16 = Transformer::Create(config, 4, model::DType::kBF16);
  ASSERT_TRUE(bf16.ok());
  model::GenerateOptions go;
  go.sampling.temperature = 0;
  go.max_new_tokens = 8;
  const std::vector<std::vector<int64_t>> prompts = {{1, 2}, {3, 4, 5}};
  auto want = model::Generate(*bf16, prompts, go);
  ASSERT_TRUE(want.ok());
  Status follower_status;
  RunRanks(2, [&](Group& g) {
    if (g.rank() == 1) {
      auto f32 = Transformer::Create(config, 99);  // float32, until the leader's weights come
      ASSERT_TRUE(f32.ok());
      follower_status = RunGroupFollower(g, *f32, {});
      return;
    }
    GroupLeader leader(&g, {});
    auto got = leader.Generate(*bf16, 1, prompts, go, nullptr);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ((*got)[i].response_ids, (*want)[i].response_ids);
    EXPECT_TRUE(leader.Stop().ok());
  });
  EXPECT_TRUE(follower_status.ok()) << follower_status.ToString();
}

TEST(GroupGenerateTest, ALostFollowerFailsTheLeadersBatchWithUnavailable) {
  model::ModelConfig config = model::testing::TinyConfig(model::Architecture::kLlama, true, 2);
  auto m = Transformer::Create(config, 1);
  ASSERT_TRUE(m.ok());
  Status leader_status;
  RunRanks(2, [&](Group& g) {
    if (g.rank() == 1) return;  // the follower is gone before the first request
    GroupLeader leader(&g, {});
    model::GenerateOptions go;
    go.max_new_tokens = 4;
    Result<std::vector<model::Generation>> got = Status::Internal("not run");
    for (int i = 0; i < 50 && (got = leader.Generate(*m, 1, {{1, 2}}, go, nullptr)).ok(); ++i) {
    }
    leader_status = got.status();
  });
  EXPECT_EQ(leader_status.code(), Code::kUnavailable) << leader_status.ToString();
}

}  // namespace
}  // namespace rl::dist
