// CoProcess's sandbox options. Its line exchange, restarts and timeouts are tested through
// rl-reward's ExecVerifier (lib/rl/reward/exec_verifier_test.cc) and rl-env's pool
// (lib/rl/env/pool_test.cc).
#include "rl/core/coprocess.h"

#include <gtest/gtest.h>

#include <thread>

#include "rl/core/clock.h"

namespace rl {
namespace {

TEST(CoProcessTest, LimitsAreSetBeforeTheCommandRuns) {
  CoProcessOptions o;
  o.memory_bytes = int64_t{300} << 20;
  o.cpu_seconds = 50;
  CoProcess p("while read -r l; do echo \"$(ulimit -v) $(ulimit -t)\"; done", o);
  auto r = p.Call("x", 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, std::to_string(300 * 1024) + " 50");
}

TEST(CoProcessTest, TheCpuLimitEndsASpinningCommand) {
  CoProcessOptions o;
  o.cpu_seconds = 1;
  CoProcess p("read -r l; while :; do :; done", o);
  int64_t start = MonoMillis();
  auto r = p.Call("x", 10000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_NE(p.last_exit().find("SIGXCPU"), std::string::npos) << p.last_exit();
  EXPECT_LT(MonoMillis() - start, 5000);
}

TEST(CoProcessTest, MaxCpuMillisFindsTheBusiestProcessOfTheCommand) {
  // The loop runs in a child of /bin/sh (a subshell), which itself stays idle.
  CoProcess p("(while read -r l; do i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; echo done; done); exit");
  EXPECT_EQ(p.MaxCpuMillis(), -1);
  ASSERT_TRUE(p.Call("x", 20000).ok());
  EXPECT_GT(p.MaxCpuMillis(), 10);
}

TEST(CoProcessTest, OneLineRefusesASecondLineAndCapsAFlood) {
  CoProcessOptions o;
  o.one_line = true;
  o.max_output_bytes = 1000;
  // Both lines in one write (a second line that comes later is stray output for the next Call).
  CoProcess two("while read -r l; do printf 'a\\nb\\n'; done", o);
  auto r = two.Call("x", 5000);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kDataError) << r.status().ToString();
  EXPECT_NE(r.status().message().find("more than one line"), std::string::npos);
  EXPECT_FALSE(two.running());

  CoProcess flood("yes", o);
  r = flood.Call("x", 5000);
  EXPECT_EQ(r.status().code(), Code::kTooLarge) << r.status().ToString();
  CoProcess long_line("head -c 5000 /dev/zero | tr '\\0' x", o);
  r = long_line.Call("x", 5000);
  EXPECT_EQ(r.status().code(), Code::kTooLarge) << r.status().ToString();
  CoProcess fits("while read -r l; do head -c 999 /dev/zero | tr '\\0' x; echo; done", o);
  r = fits.Call("x", 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->size(), 999u);
}

TEST(CoProcessTest, StderrIsReadSoAChattyCommandNeverBlocks) {
  CoProcessOptions o;
  o.log_stderr = true;
  // 1 MB of stderr per request: more than a pipe holds.
  CoProcess p("while read -r l; do head -c 1000000 /dev/zero | tr '\\0' e >&2; echo ok; done", o);
  for (int i = 0; i < 2; ++i) {
    auto r = p.Call("x", 5000);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(*r, "ok");
  }
}

TEST(CoProcessTest, NoNetworkWhereTheKernelAllowsIt) {
  if (!ProbeNetworkIsolation().ok()) GTEST_SKIP() << ProbeNetworkIsolation().message();
  CoProcessOptions o;
  o.network = NetworkIsolation::kRequire;
  // Only a loopback interface (/proc/net is per network namespace); our own ids map to themselves.
  CoProcess p("read -r l; echo \"$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' \\n') $(id -u)\"", o);
  auto r = p.Call("x", 5000);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "lo " + std::to_string(::geteuid()));
}

TEST(CoProcessTest, CancelEndsACallInProgress) {
  std::atomic<bool> cancel{false};
  CoProcessOptions o;
  o.cancel = &cancel;
  CoProcess p("read -r l; sleep 60", o);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  int64_t start = MonoMillis();
  auto r = p.Call("x", 30000);
  t.join();
  EXPECT_EQ(r.status().code(), Code::kUnavailable);
  EXPECT_LT(MonoMillis() - start, 1000);
  EXPECT_FALSE(p.running());
}

}  // namespace
}  // namespace rl
