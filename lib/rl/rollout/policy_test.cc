#include "rl/rollout/policy.h"

#include <gtest/gtest.h>
#include <ATen/ATen.h>
#include <torch/cuda.h>

#include <fstream>

#include "rl/rollout/test_model.h"

namespace rl::rollout {
namespace {

using testing::TestDir;
using testing::WriteWeights;

TEST(NewestWeightsTest, PicksTheHighestVersionAndIgnoresOtherNames) {
  std::string dir = TestDir("weights");
  auto none = NewestWeights(dir);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  EXPECT_FALSE(NewestWeights(dir + "/missing")->has_value());
  for (const char* name : {"weights-2.safetensors", "weights-10.safetensors", "weights-11.safetensors.tmp",
                           "weights-x.safetensors", "weights-.safetensors", "other-99.safetensors"}) {
    std::ofstream(dir + "/" + name) << "x";
  }
  auto newest = NewestWeights(dir);
  ASSERT_TRUE(newest.ok());
  ASSERT_TRUE(newest->has_value());
  EXPECT_EQ((*newest)->version, 10u);
  EXPECT_EQ((*newest)->path, dir + "/weights-10.safetensors");
  std::filesystem::remove_all(dir);
}

TEST(PolicyTest, RefreshSwitchesOnlyToANewerCompleteVersion) {
  std::string dir = TestDir("weights");
  Policy p;
  auto r = p.Refresh(dir);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(*r);
  EXPECT_FALSE(p.loaded());
  WriteWeights(dir, 1, 7);
  EXPECT_TRUE(*p.Refresh(dir));
  EXPECT_EQ(p.version(), 1u);
  EXPECT_FALSE(*p.Refresh(dir));  // nothing newer
  WriteWeights(dir, 3, 8);
  EXPECT_TRUE(*p.Refresh(dir));
  EXPECT_EQ(p.version(), 3u);
  std::filesystem::remove_all(dir);
}

TEST(PolicyTest, AFileThatFailsToLoadKeepsTheCurrentWeights) {
  std::string dir = TestDir("weights");
  WriteWeights(dir, 1, 7);
  Policy p;
  ASSERT_TRUE(*p.Refresh(dir));
  std::ofstream(dir + "/" + WeightsFileName(2)) << "not safetensors";
  EXPECT_FALSE(*p.Refresh(dir));
  EXPECT_EQ(p.version(), 1u);
  EXPECT_FALSE(p.Newer(dir)->has_value());  // not tried again
  WriteWeights(dir, 3, 8);
  EXPECT_TRUE(*p.Refresh(dir));
  EXPECT_EQ(p.version(), 3u);
  std::filesystem::remove_all(dir);
}

// --precision bf16: every version the policy takes computes in bfloat16, whatever dtype its file or
// pull came in; without a dtype a version keeps its own.
TEST(PolicyTest, APrecisionCastsEveryVersionItTakes) {
  std::string dir = TestDir("weights");
  WriteWeights(dir, 1, 7);
  Policy bf16(c10::Device(c10::kCPU), model::DType::kBF16), own;
  ASSERT_TRUE(*bf16.Refresh(dir));
  ASSERT_TRUE(*own.Refresh(dir));
  EXPECT_EQ(bf16.model().dtype(), model::DType::kBF16);
  EXPECT_EQ(own.model().dtype(), model::DType::kF32);
  auto pulled = model::Transformer::Create(testing::TinyConfig(), 9);
  ASSERT_TRUE(pulled.ok());
  ASSERT_TRUE(bf16.Use(pulled->Clone().value(), 2, "test").ok());
  EXPECT_EQ(bf16.model().dtype(), model::DType::kBF16);
  EXPECT_EQ(bf16.version(), 2u);
  // The cast model is the float32 one rounded: close, and not the same.
  const at::Tensor tokens = at::tensor({1, 2, 3}, at::kLong).view({1, 3});
  const at::Tensor want = pulled->Forward(tokens).value();
  const at::Tensor got = bf16.model().Forward(tokens).value().to(at::kFloat);
  const double diff = (got - want).abs().max().item<double>();
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(diff, 0.1 * want.abs().max().item<double>());
  std::filesystem::remove_all(dir);
}

// A policy on a GPU takes each version there (Load and Use copy host weights to the device at the
// switch); skipped where no CUDA device is visible. gpu-check.sh runs it on one.
TEST(PolicyTest, VersionsLandOnThePolicysDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  std::string dir = TestDir("weights");
  WriteWeights(dir, 1, 7);
  Policy p(c10::Device(c10::kCUDA, 0));
  ASSERT_TRUE(*p.Refresh(dir));
  EXPECT_TRUE(p.model().device().is_cuda());
  auto host = model::Transformer::Create(testing::TinyConfig(), 9);
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE(p.Use(*host, 2, "test").ok());
  EXPECT_TRUE(p.model().device().is_cuda());
  EXPECT_TRUE(host->device().is_cuda()) << "a Transformer is a shared handle: the caller's moved with it";
  const at::Tensor tokens = at::tensor({1, 2, 3}, at::kLong).view({1, 3});
  auto reference = model::Transformer::Create(testing::TinyConfig(), 9).value().Forward(tokens).value();
  EXPECT_LT((p.model().Forward(tokens).value().cpu() - reference).abs().max().item<double>(), 1e-4);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace rl::rollout
