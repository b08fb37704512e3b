// Groups whose ranks hold GPUs (GroupOptions::gpu): tensors on the GPU go through NCCL where the
// build has it and every rank has a GPU of its own, and through host memory otherwise (ranks that
// share a GPU, or a build without NCCL), with the sums host tensors get. Every test skips where no
// CUDA device is visible; scripts/gpu-check.sh runs them on a GPU (one GPU: the NCCL
// communicator of one rank and two ranks sharing it; two or more: NCCL between ranks).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "rl/dist/nccl_comm.h"
#include "rl/dist/test_ranks.h"

namespace rl::dist {
namespace {

at::Tensor On(int gpu, const at::Tensor& host) { return host.to(c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(gpu))); }

// Sum, broadcast and gather of float32, bf16 and int64 tensors on each rank's GPU, against what
// the same ranks compute on the host.
void ExpectCollectivesOnTheGpu(Group& g, int gpu) {
  const double r = g.rank();
  at::Tensor f = On(gpu, at::arange(1000, at::kFloat) * (r + 1));
  ASSERT_TRUE(g.AllReduceSum(f).ok());
  const double ranks = g.size(), factor = ranks * (ranks + 1) / 2;
  EXPECT_TRUE(f.is_cuda());
  EXPECT_TRUE(at::equal(f.cpu(), at::arange(1000, at::kFloat) * factor));
  at::Tensor h = On(gpu, at::full({7}, 0.5 + r, at::kBFloat16));
  ASSERT_TRUE(g.AllReduceSum(h).ok());
  EXPECT_EQ(h.scalar_type(), at::kBFloat16);
  EXPECT_DOUBLE_EQ(h[3].item<double>(), 0.5 * ranks + (ranks - 1) * ranks / 2);
  at::Tensor l = On(gpu, at::full({3}, g.rank() == 0 ? int64_t{1} << 40 : int64_t{-5}, at::kLong));
  ASSERT_TRUE(g.Broadcast(l, 0).ok());
  EXPECT_EQ(l[2].item<int64_t>(), int64_t{1} << 40);
  std::vector<at::Tensor> all;
  ASSERT_TRUE(g.AllGather(On(gpu, at::full({2}, r, at::kFloat)), &all).ok());
  ASSERT_EQ(static_cast<int>(all.size()), g.size());
  for (int k = 0; k < g.size(); ++k) {
    EXPECT_TRUE(all[k].is_cuda());
    EXPECT_EQ(all[k][1].item<double>(), k);
  }
}

TEST(GroupGpuTest, ARankOnItsGpuReducesThereThroughNcclWhereBuilt) {
  RL_REQUIRE_GPUS(1);
  testing::RunRanks(1, [](Group& g) {
    EXPECT_EQ(g.OnNccl(), NcclComm::Built());
    ExpectCollectivesOnTheGpu(g, 0);
  }, [](int) { return 0; });
}

TEST(GroupGpuTest, RanksSharingAGpuGoThroughHostMemory) {
  RL_REQUIRE_GPUS(1);
  testing::RunRanks(2, [](Group& g) {
    EXPECT_FALSE(g.OnNccl()) << "NCCL refuses two ranks on one GPU";
    ExpectCollectivesOnTheGpu(g, 0);
  }, [](int) { return 0; });
}

TEST(GroupGpuTest, RanksOnTheirOwnGpusReduceThroughNccl) {
  RL_REQUIRE_GPUS(2);
  if (!NcclComm::Built()) GTEST_SKIP() << "built without RL_WITH_NCCL";
  testing::RunRanks(2, [](Group& g) {
    EXPECT_TRUE(g.OnNccl());
    ExpectCollectivesOnTheGpu(g, g.rank());
  }, [](int r) { return r; });
}

// A peer that never takes part: the NCCL all-reduce gives up at the group's timeout (here 20 s,
// test_ranks.h) with Unavailable instead of hanging, and the group stays broken.
TEST(GroupGpuTest, ALostPeerEndsANcclCollectiveAtTheTimeout) {
  RL_REQUIRE_GPUS(2);
  if (!NcclComm::Built()) GTEST_SKIP() << "built without RL_WITH_NCCL";
  testing::RunRanks(2, [](Group& g) {
    if (g.rank() == 1) return;  // the lost peer
    at::Tensor t = On(0, at::ones({16}, at::kFloat));
    const auto t0 = std::chrono::steady_clock::now();
    Status s = g.AllReduceSum(t);
    EXPECT_EQ(s.code(), Code::kUnavailable) << s.ToString();
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(40));
    EXPECT_EQ(g.AllReduceSum(t).code(), Code::kUnavailable);
  }, [](int r) { return r; });
}

// A rank with a GPU and one without would never meet in a collective of GPU tensors (NCCL or
// host staging on one side, Gloo on the other): both are told at once, on any machine (the check
// is made before any GPU is touched).
TEST(GroupGpuTest, RanksWithAndWithoutAGpuDoNotFormAGroup) {
  const std::string endpoint = "127.0.0.1:" + std::to_string(testing::FreePort());
  std::vector<Status> got(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      GroupOptions o;
      o.endpoint = endpoint;
      o.rank = r;
      o.size = 2;
      o.timeout_ms = 20000;
      o.gpu = r == 0 ? 0 : -1;
      got[static_cast<size_t>(r)] = Group::Join(o).status();
    });
  }
  for (auto& t : ranks) t.join();
  for (const Status& s : got) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("rank 0 computes on a GPU and rank 1 on the CPU"), std::string::npos) << s.ToString();
  }
}

TEST(GroupGpuTest, WithoutNcclConnectSaysSo) {
  if (NcclComm::Built()) GTEST_SKIP() << "built with NCCL";
  auto c = NcclComm::Connect(nullptr, "x", 0, 1, 0, 1000);
  EXPECT_EQ(c.status().code(), Code::kUnavailable);
  EXPECT_NE(c.status().message().find("RL_WITH_NCCL"), std::string::npos) << c.status().ToString();
}

}  // namespace
}  // namespace rl::dist
