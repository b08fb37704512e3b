#include "rl/health/cgroup_text.h"

#include <gtest/gtest.h>

namespace rl::health {
namespace {

// mountinfo as a Debian 12 host with systemd shows it: the unified (v2) tree only.
constexpr const char* kV2Host =
    "22 28 0:21 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw\n"
    "26 22 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n"
    "28 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw,errors=remount-ro\n";
// A container with a private cgroup namespace on a v2 host: its own group is the mount's root.
constexpr const char* kV2Container =
    "612 590 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup rw\n";
// A v1 machine (this one): a tmpfs with one hierarchy per controller; the unified tree of a
// hybrid host comes first but names no controller, and the v1 cpu hierarchy wins.
constexpr const char* kV1Hybrid =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "30 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:5 - cgroup2 cgroup2 rw\n"
    "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
    "32 31 0:29 /docker/abc /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:11 - cgroup cgroup rw,cpu,cpuacct\n";

TEST(CgroupText, FindsTheCpuMountOfEachLayout) {
  auto v2 = CpuMountFrom(kV2Host);
  ASSERT_TRUE(v2.has_value());
  EXPECT_TRUE(v2->v2);
  EXPECT_EQ(v2->point, "/sys/fs/cgroup");
  EXPECT_EQ(v2->root, "/");
  auto box = CpuMountFrom(kV2Container);
  ASSERT_TRUE(box.has_value());
  EXPECT_TRUE(box->v2);
  auto v1 = CpuMountFrom(kV1Hybrid);
  ASSERT_TRUE(v1.has_value());
  EXPECT_FALSE(v1->v2) << "a v1 cpu hierarchy is taken before the unified tree";
  EXPECT_EQ(v1->point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(v1->root, "/docker/abc");
  // cpuacct alone is not cpu; nothing mounted with cpu at all is no mount.
  EXPECT_FALSE(CpuMountFrom("33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n").has_value());
  EXPECT_FALSE(CpuMountFrom("").has_value());
}

TEST(CgroupText, SkipsMountLinesThatDoNotParse) {
  EXPECT_FALSE(CpuMountFrom("26 22 0:24 / /sys/fs/cgroup rw cgroup2 cgroup2 rw\n").has_value())
      << "no '-' separator";
  EXPECT_FALSE(CpuMountFrom("26 22 0:24 / /sys/fs/cgroup rw - cgroup2\n").has_value()) << "cut short";
  EXPECT_FALSE(CpuMountFrom("garbage\n\n\x01\x02 -\n").has_value());
  auto m = CpuMountFrom(std::string("junk line\n") + kV2Host);
  ASSERT_TRUE(m.has_value());
  EXPECT_TRUE(m->v2);
}

TEST(CgroupText, DecodesTheOctalEscapesOfMountPaths) {
  auto m = CpuMountFrom("26 22 0:24 /a\\040b /mnt/my\\040cgroup rw - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->point, "/mnt/my cgroup");
  EXPECT_EQ(m->root, "/a b");
  auto cut = CpuMountFrom("26 22 0:24 / /mnt/x\\04 rw - cgroup2 cgroup2 rw\n");
  ASSERT_TRUE(cut.has_value());
  EXPECT_EQ(cut->point, "/mnt/x\\04") << "an escape cut short stays as written";
}

TEST(CgroupText, FindsTheGroupOfEachVersion) {
  const char* v2 = "0::/user.slice/user-1000.slice/session-2.scope\n";
  EXPECT_EQ(CpuGroupFrom(v2, true), "/user.slice/user-1000.slice/session-2.scope");
  EXPECT_EQ(CpuGroupFrom(v2, false), "") << "v2 names no controllers";
  const char* v1 = "12:pids:/\n4:cpu,cpuacct:/docker/abc/job\n1:name=systemd:/\n0::/\n";
  EXPECT_EQ(CpuGroupFrom(v1, false), "/docker/abc/job");
  EXPECT_EQ(CpuGroupFrom(v1, true), "/");
  EXPECT_EQ(CpuGroupFrom("3:cpuacct:/x\n", false), "") << "cpuacct is not cpu";
  EXPECT_EQ(CpuGroupFrom("no colons\n", true), "");
}

TEST(CgroupText, TakesTheMountRootOffWholeComponentsOnly) {
  const CgroupMount v1{"/docker/abc", "/sys/fs/cgroup/cpu", false};
  EXPECT_EQ(GroupDirOf(v1, "/docker/abc/job"), "/sys/fs/cgroup/cpu/job");
  EXPECT_EQ(GroupDirOf(v1, "/docker/abc"), "/sys/fs/cgroup/cpu");
  EXPECT_EQ(GroupDirOf(v1, "/docker/abcd"), "/sys/fs/cgroup/cpu/docker/abcd") << "/abc is not a prefix of /abcd";
  const CgroupMount v2{"/", "/sys/fs/cgroup", true};
  EXPECT_EQ(GroupDirOf(v2, "/"), "/sys/fs/cgroup");
  EXPECT_EQ(GroupDirOf(v2, "/roleflow-1a2b3c4d/slots-2"), "/sys/fs/cgroup/roleflow-1a2b3c4d/slots-2");
}

TEST(CgroupText, ReadsWhetherCpuIsHandedDown) {
  EXPECT_TRUE(HandsDownCpu("cpuset cpu io memory pids\n"));
  EXPECT_FALSE(HandsDownCpu("cpuset io memory pids\n")) << "cpuset is not cpu";
  EXPECT_FALSE(HandsDownCpu(""));
  EXPECT_FALSE(HandsDownCpu("io\ncpu\n")) << "only the first line is the list";
}

TEST(CgroupText, ReadsQuotasOfBothVersions) {
  EXPECT_EQ(*QuotaFromCpuMax("max 100000\n", "g"), -1.0);
  EXPECT_DOUBLE_EQ(*QuotaFromCpuMax("50000 100000\n", "g"), 0.5);
  EXPECT_DOUBLE_EQ(*QuotaFromCpuMax("2000 10000", "g"), 0.2);
  EXPECT_DOUBLE_EQ(*QuotaFromCfs("200000\n", "100000\n", "g"), 2.0);
  EXPECT_EQ(*QuotaFromCfs("-1\n", "100000\n", "g"), -1.0);
  for (const char* bad : {"", "max", "abc 100000", "50000 0", "50000 -5", "5e4 100000", "50000 100000 7", "-3 100000"}) {
    auto q = QuotaFromCpuMax(bad, "/sys/fs/cgroup/x/cpu.max");
    ASSERT_FALSE(q.ok()) << "'" << bad << "'";
    EXPECT_EQ(q.status().code(), Code::kDataError);
    EXPECT_NE(q.status().message().find("/sys/fs/cgroup/x/cpu.max"), std::string::npos);
  }
  for (auto [q, p] : std::vector<std::pair<const char*, const char*>>{{"", "100000"}, {"x", "100000"}, {"1000", "0"},
                                                                       {"-7", "100000"}, {"0", "100000"}}) {
    auto r = QuotaFromCfs(q, p, "g");
    ASSERT_FALSE(r.ok()) << q << " / " << p;
    EXPECT_EQ(r.status().code(), Code::kDataError);
  }
}

}  // namespace
}  // namespace rl::health
