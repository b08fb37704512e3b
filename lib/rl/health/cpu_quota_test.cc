#include "rl/health/cpu_quota.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "rl/health/process.h"

namespace rl::health {
namespace {

// What the kernel has charged `pid` so far: user + system time (/proc/PID/stat fields 14, 15).
double CpuSeconds(pid_t pid) {
  std::vector<std::string> f = StatFields(pid);
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

class CpuQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = FindCpuController();
    if (!c.ok()) GTEST_SKIP() << "no cpu controller to make groups in: " << c.status().ToString();
    controller_ = *c;
    run_dir_ = ::testing::TempDir() + "/cpu-quota-" + std::to_string(::getpid());
    ::mkdir(run_dir_.c_str(), 0755);
  }
  void TearDown() override {
    for (pid_t pid : pids_) StopProcess(pid, 0);
    if (!run_dir_.empty()) RemoveQuotaGroups(run_dir_);
  }
  CpuController controller_;
  std::string run_dir_;
  std::vector<pid_t> pids_;
};

TEST_F(CpuQuotaTest, ARoleStartsInItsGroupAndTheKernelHoldsItToTheQuota) {
  auto fd = OpenQuotaGroup(run_dir_, {2, 3}, 0.2);
  ASSERT_TRUE(fd.ok()) << fd.status().ToString();
  auto pid = SpawnRole("while :; do :; done", {}, run_dir_ + "/spin.log", -1, {}, *fd);
  ::close(*fd);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  pids_.push_back(*pid);
  // The child joins between fork and exec: a moment after SpawnRole returns.
  auto quota = QuotaOfProcess(*pid);
  for (int i = 0; i < 200 && quota.ok() && *quota < 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    quota = QuotaOfProcess(*pid);
  }
  ASSERT_TRUE(quota.ok()) << quota.status().ToString();
  EXPECT_NEAR(*quota, 0.2, 1e-9);
  struct stat st;
  EXPECT_EQ(::stat(QuotaGroupDir(controller_, run_dir_, {2, 3}).c_str(), &st), 0);
  // A busy loop of 1.5 s wall clock gets at most 0.2 CPU s a second (plus a period's slack);
  // unbounded, it would take nearly all of it.
  double before = CpuSeconds(*pid);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  double used = CpuSeconds(*pid) - before;
  EXPECT_LT(used, 0.2 * 1.5 + 0.15) << "the quota did not hold: " << used << " CPU s in 1.5 s";
  EXPECT_GT(used, 0.05) << "the role hardly ran";
}

TEST_F(CpuQuotaTest, ARunningProcessJoinsAGroupAndGroupsGoWhenEmpty) {
  auto pid = SpawnRole("sleep 30", {}, run_dir_ + "/sleep.log");
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  pids_.push_back(*pid);
  auto none = QuotaOfProcess(*pid);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_LT(*none, 0);  // a process of ours is in no quota group to start with
  ASSERT_TRUE(JoinQuotaGroup(run_dir_, {5}, 0.5, *pid).ok());
  EXPECT_NEAR(*QuotaOfProcess(*pid), 0.5, 1e-9);
  // The same group again with another quota: one group per slot set, its quota updated.
  ASSERT_TRUE(JoinQuotaGroup(run_dir_, {5}, 0.25, *pid).ok());
  EXPECT_NEAR(*QuotaOfProcess(*pid), 0.25, 1e-9);
  const std::string dir = QuotaGroupDir(controller_, run_dir_, {5});
  RemoveQuotaGroups(run_dir_);  // in use: kept
  struct stat st;
  EXPECT_EQ(::stat(dir.c_str(), &st), 0);
  StopProcess(*pid, 0);
  pids_.clear();
  RemoveQuotaGroups(run_dir_);
  EXPECT_NE(::stat(dir.c_str(), &st), 0);
  EXPECT_FALSE(OpenQuotaGroup(run_dir_, {1}, 0).ok());
  EXPECT_FALSE(OpenQuotaGroup(run_dir_, {1}, 5000).ok());
}

}  // namespace
}  // namespace rl::health
