#include "rl/rollout/policy.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace rl::rollout
