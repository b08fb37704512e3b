#include "rl/model/device.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "rl/model/kv_cache.h"
#include "rl/model/test_util.h"

namespace rl::model {
namespace {

TEST(DeviceTest, NamesParseAndPrintBack) {
  for (const char* name : {"cpu", "cuda:0", "cuda:3", "cuda:12"}) {
    auto d = ParseDevice(name);
    ASSERT_TRUE(d.ok()) << name << ": " << d.status().ToString();
    EXPECT_EQ(DeviceName(*d), name);
  }
  EXPECT_EQ(DeviceName(ParseDevice("cuda").value()), "cuda:0");
  for (const char* bad : {"", "gpu", "CPU", "cuda:", "cuda:-1", "cuda:x", "cuda:1234", "cuda:200", "cuda0", "cpu:0", "mps"}) {
    auto d = ParseDevice(bad);
    EXPECT_EQ(d.status().code(), Code::kInvalidArgument) << "'" << bad << "' was accepted";
  }
}

// On this build (or a machine without a GPU) a CUDA device is Unavailable with a reason, prefixed
// by the flag: the one line a role exits 69 with.
TEST(DeviceTest, AMissingGpuIsUnavailableWithItsReason) {
  EXPECT_TRUE(OpenDevice("cpu").ok());
  if (torch::cuda::is_available()) GTEST_SKIP() << "this machine has a GPU";
  auto d = OpenDevice("cuda:1");
  ASSERT_EQ(d.status().code(), Code::kUnavailable) << d.status().ToString();
  EXPECT_EQ(d.status().message().rfind("--device cuda:1: ", 0), 0u) << d.status().message();
  EXPECT_NE(d.status().message().find("CUDA"), std::string::npos) << d.status().message();
  EXPECT_EQ(OpenDevice("tpu").status().code(), Code::kInvalidArgument);
}

// "cuda" among ranks: the local rank modulo the GPUs seen; other names as they are.
TEST(DeviceTest, RanksTakeTheirOwnGpuModuloTheGpusSeen) {
  for (int rank : {-1, 0, 3}) EXPECT_TRUE(OpenRankDevice("cpu", rank)->is_cpu());
  EXPECT_EQ(OpenRankDevice("cuda:x", 2).status().code(), Code::kInvalidArgument);
  if (!torch::cuda::is_available()) {
    EXPECT_EQ(OpenRankDevice("cuda", 1).status().code(), Code::kUnavailable);
    return;
  }
  const int gpus = static_cast<int>(torch::cuda::device_count());
  for (int rank = 0; rank < 2 * gpus + 1; ++rank) {
    auto d = OpenRankDevice("cuda", rank);
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    EXPECT_EQ(d->index(), rank % gpus) << "rank " << rank;
    EXPECT_EQ(OpenRankDevice("cuda:0", rank)->index(), 0) << "an index is taken as given";
  }
}

TEST(DeviceTest, HostCopyIsIndependentAndPeaksAreForGpusOnly) {
  at::Tensor t = at::arange(6, at::kFloat);
  at::Tensor c = HostCopy(t);
  t.add_(1);
  EXPECT_TRUE(c.equal(at::arange(6, at::kFloat)));
  const c10::Device cpu(c10::kCPU);
  EXPECT_FALSE(PeakDeviceBytes(cpu).has_value());
  ResetPeakDeviceBytes(cpu);
  Synchronize(cpu);
}

// A model's handle follows its device: To is a no-op where it is, Clone keeps the device, Clone(kCPU)
// gives a host snapshot, and a cache made for another device is refused by ForwardStep.
TEST(DeviceTest, ModelsMoveAndTheirCachesMustMatch) {
  auto m = Transformer::Create(testing::TinyConfig(), 3);
  ASSERT_TRUE(m.ok());
  EXPECT_TRUE(m->device().is_cpu());
  ASSERT_TRUE(m->To(c10::Device(c10::kCPU)).ok());
  auto host = m->Clone(c10::Device(c10::kCPU));
  ASSERT_TRUE(host.ok());
  EXPECT_TRUE(host->device().is_cpu());
  const at::Tensor tokens = at::tensor({1, 2, 3}, at::kLong).view({1, 3});
  EXPECT_TRUE(m->Forward(tokens).value().equal(host->Forward(tokens).value()));
  if (torch::cuda::is_available()) return;  // the mismatch below needs a device without memory
  // A cache that claims another device: its tensors are never touched.
  auto cache = KvCache::Create(m->config(), 1, m->dtype(), 1, c10::Device(c10::kCUDA, 0));
  if (cache.ok()) {
    auto logits = m->ForwardStep(tokens, {0}, &*cache);
    EXPECT_EQ(logits.status().code(), Code::kInvalidArgument) << logits.status().ToString();
  } else {
    EXPECT_EQ(cache.status().code(), Code::kInternal) << cache.status().ToString();  // no CUDA allocator
  }
}

}  // namespace
}  // namespace rl::model
