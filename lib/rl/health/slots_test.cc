#include "rl/health/slots.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "rl/health/process.h"

namespace rl::health {
namespace {

TEST(SlotsTest, ParsesCpuAndGpuListsTheWayTasksetWritesThem) {
  EXPECT_EQ(*ParseIdList("0"), (std::vector<int>{0}));
  EXPECT_EQ(*ParseIdList("3,1,2"), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(*ParseIdList("0-2,6,5"), (std::vector<int>{0, 1, 2, 5, 6}));
  EXPECT_EQ(IdListText({0, 1, 2, 5, 6, 8}), "0-2,5-6,8");
  EXPECT_EQ(IdListText({}), "");
  for (const char* bad : {"", "a", "1-", "-1", "3-1", "1,,2", "1,", "0-99999999", "1 2", "0x1"}) {
    EXPECT_FALSE(ParseIdList(bad).ok()) << bad;
  }
}

TEST(SlotsTest, ASlotNamesCpusOrGpusOrBoth) {
  auto s = ParseSlot("gpus=1 cpus=0");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->cpus, (std::vector<int>{0}));
  EXPECT_EQ(s->gpus, (std::vector<int>{1}));
  EXPECT_TRUE(ParseSlot("gpus=0-3").ok());
  for (const char* bad : {"", "  ", "cpus", "cpus=", "cpu=0", "cpus=0 cpus=0", "mem=1", "cpus=4096"}) {
    auto r = ParseSlot(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  // A CPU outside this process's affinity is refused, naming the ones allowed.
  auto r = ParseSlot("cpus=1000");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("not one this machine lets us use"), std::string::npos);
}

TEST(SlotsTest, AGrantIsTheUnionOfItsSlotsAndSaysSoInTheEnvironment) {
  std::vector<Slot> all = {*ParseSlot("cpus=0"), *ParseSlot("cpus=0 gpus=2"), *ParseSlot("gpus=1")};
  SlotGrant g = Grant(all, {2, 1});
  EXPECT_EQ(g.slots, (std::vector<int>{1, 2}));
  EXPECT_EQ(g.cpus, (std::vector<int>{0}));
  EXPECT_EQ(g.gpus, (std::vector<int>{1, 2}));
  auto env = GrantEnv(g);
  EXPECT_EQ(env["RL_SLOT_IDS"], "1-2");
  EXPECT_EQ(env["RL_SLOT_CPUS"], "0");
  EXPECT_EQ(env["RL_SLOT_THREADS"], "1");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1-2");
  EXPECT_EQ(GrantEnv(Grant(all, {0})).count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(SlotsTest, AQuotaIsCpusOfTimeAndAGrantHasOneOnlyWhenEverySlotHas) {
  auto s = ParseSlot("cpus=0 quota=0.25");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_DOUBLE_EQ(s->quota, 0.25);
  EXPECT_DOUBLE_EQ(ParseSlot("quota=1")->quota, 1.0);
  for (const char* bad : {"quota=", "quota=0", "quota=0.001", "quota=-1", "quota=1e3", "quota=.5", "quota=0.5x",
                          "quota=nan", "quota=inf", "quota=1 quota=1", "cpus=0 quota=1.5", "quota=99999"}) {
    EXPECT_FALSE(ParseSlot(bad).ok()) << bad;
  }
  // More time than the slot's CPUs have could never be used: refused, saying so.
  auto r = ParseSlot("cpus=0 quota=2");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("could never be used"), std::string::npos) << r.status().ToString();

  std::vector<Slot> all = {*ParseSlot("cpus=0 quota=0.25"), *ParseSlot("cpus=0 quota=0.5"), *ParseSlot("cpus=0")};
  SlotGrant both = Grant(all, {0, 1});
  EXPECT_DOUBLE_EQ(both.quota, 0.75);
  auto env = GrantEnv(both);
  EXPECT_EQ(env["RL_SLOT_QUOTA"], "0.75");
  EXPECT_EQ(env["RL_SLOT_THREADS"], "1");  // 0.75 CPUs: one thread
  // With a slot of no quota, the grant is as much CPU as its CPUs: no quota at all.
  EXPECT_DOUBLE_EQ(Grant(all, {0, 2}).quota, 0.0);
  EXPECT_EQ(GrantEnv(Grant(all, {2})).count("RL_SLOT_QUOTA"), 0u);
}

std::string CpusAllowed(pid_t pid, const std::string& task = "") {
  std::ifstream in("/proc/" + std::to_string(pid) + task + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Cpus_allowed_list:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 18));
  }
  return "";
}

TEST(SlotsTest, ARoleStartsOnItsSlotsCpusAndAPinnedProcessMovesThere) {
  std::vector<int> allowed = AllowedCpus();
  ASSERT_FALSE(allowed.empty());
  std::vector<int> last = {allowed.back()};
  // A log of this run's own: the role appends, and a line left by an earlier run would pass for
  // this one's before its grep has run.
  const std::string log = ::testing::TempDir() + "/slots-role." + std::to_string(::getpid()) + ".log";
  std::remove(log.c_str());
  // The role reports its own affinity, as the kernel sees it, from inside the command.
  auto pid = SpawnRole("grep Cpus_allowed_list /proc/self/status; sleep 5", {}, log, -1, last);
  ASSERT_TRUE(pid.ok()) << pid.status().ToString();
  for (int i = 0; i < 200 && CpusAllowed(*pid) != IdListText(last); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(CpusAllowed(*pid), IdListText(last));
  // The command's grep may not have run yet on a loaded machine: wait for its line (bounded)
  // before the role is pinned elsewhere, or it can report the new CPUs (as a CI run once saw),
  // and before it is stopped, or the log can still be empty.
  auto read_log = [&]() {
    std::ifstream in(log);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  std::string text = read_log();
  for (int i = 0; i < 400 && text.find('\n') == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    text = read_log();
  }
  EXPECT_NE(text.find("Cpus_allowed_list:\t" + IdListText(last)), std::string::npos) << text;
  EXPECT_TRUE(PinProcess(*pid, {allowed.front()}).ok());
  EXPECT_EQ(CpusAllowed(*pid), std::to_string(allowed.front()));
  StopProcess(*pid, 0);
  std::remove(log.c_str());
  EXPECT_FALSE(PinProcess(999999999, {0}).ok());
}

}  // namespace
}  // namespace rl::health
