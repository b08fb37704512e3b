// The data-parallel helpers (data_parallel.h): how ranks split the groups they took too many of,
// where a rank's place comes from (flags, torchrun, srun), and the gathers over a real Gloo group.
#include "rl/train/data_parallel.h"

#include <gtest/gtest.h>

#include "rl/dist/test_ranks.h"

namespace rl::train {
namespace {

TEST(DataParallelTest, TheHighestRanksGiveBackTheExcessFirst) {
  const std::vector<int64_t> got = {3, 2, 1};
  EXPECT_EQ(GroupsToGiveBack(got, 0, 0) + GroupsToGiveBack(got, 0, 2), 0);
  EXPECT_EQ(GroupsToGiveBack(got, 2, 2), 1);
  EXPECT_EQ(GroupsToGiveBack(got, 2, 1), 1);
  EXPECT_EQ(GroupsToGiveBack(got, 2, 0), 0);
  int64_t total = 0;
  for (int r = 0; r < 3; ++r) total += GroupsToGiveBack(got, 5, r);
  EXPECT_EQ(total, 5);
  EXPECT_EQ(GroupsToGiveBack(got, 5, 0), 2);
}

TEST(DataParallelTest, FlagsWinOverTorchrunWhichWinsOverSrun) {
  std::map<std::string, std::string> env = {{"WORLD_SIZE", "4"}, {"RANK", "3"}, {"MASTER_ADDR", "h"},
                                            {"MASTER_PORT", "29500"}, {"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "7"}};
  auto p = ResolveRankPlace({}, false, false, env);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->world, 4);
  EXPECT_EQ(p->rank, 3);
  EXPECT_EQ(p->rendezvous, "h:29500");
  p = ResolveRankPlace({2, 1, "a:1"}, true, true, env);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->world, 2);
  EXPECT_EQ(p->rank, 1);
  EXPECT_EQ(p->rendezvous, "a:1");
  env.erase("WORLD_SIZE");
  env.erase("RANK");
  p = ResolveRankPlace({}, false, false, env);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->world, 8);
  EXPECT_EQ(p->rank, 7);
  EXPECT_TRUE(ResolveRankPlace({}, false, false, {}).ok()) << "alone without any of them";
  EXPECT_EQ(ResolveRankPlace({}, false, false, {{"WORLD_SIZE", "2"}}).status().message(),
            "--world 2 needs --rendezvous HOST:PORT (or MASTER_ADDR and MASTER_PORT)");
  EXPECT_EQ(ResolveRankPlace({}, false, false, {{"RANK", "1x"}}).status().code(), Code::kInvalidArgument);
}

TEST(DataParallelTest, TheLocalRankComesFromTorchrunThenSrun) {
  auto p = ResolveRankPlace({}, false, false, {{"LOCAL_RANK", "3"}, {"SLURM_LOCALID", "5"}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->local_rank, 3);
  p = ResolveRankPlace({}, false, false, {{"SLURM_LOCALID", "5"}});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->local_rank, 5);
  p = ResolveRankPlace({}, false, false, {});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->local_rank, -1) << "unknown: --device cuda stays cuda:0";
  EXPECT_EQ(ResolveRankPlace({}, false, false, {{"LOCAL_RANK", "-4"}}).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(ResolveRankPlace({}, false, false, {{"LOCAL_RANK", "x"}}).status().message(),
            "LOCAL_RANK must be an integer, not 'x'");
}

TEST(DataParallelTest, GathersAndSumsAgreeOnEveryRank) {
  dist::testing::RunRanks(3, [](dist::Group& g) {
    std::vector<uint64_t> mine;
    for (int i = 0; i <= g.rank(); ++i) mine.push_back(static_cast<uint64_t>(100 * g.rank() + i));
    auto all = GatherIndices(g, mine);
    ASSERT_TRUE(all.ok()) << all.status().ToString();
    EXPECT_EQ(*all, (std::vector<uint64_t>{0, 100, 101, 200, 201, 202}));
    auto sums = SumOverRanks(g, {1.0, static_cast<double>(g.rank())});
    ASSERT_TRUE(sums.ok());
    EXPECT_EQ(*sums, (std::vector<double>{3.0, 3.0}));
    auto counts = GatherCounts(g, g.rank() * 2);
    ASSERT_TRUE(counts.ok());
    EXPECT_EQ(*counts, (std::vector<int64_t>{0, 2, 4}));
  });
}

}  // namespace
}  // namespace rl::train
