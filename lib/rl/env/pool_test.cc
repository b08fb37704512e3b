// The worker pool with real tool processes under limits: every failure kind, recovery on the
// next call, parallel calls, and the bound on processes per tool.
#include "rl/env/pool.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <future>
#include <set>

#include "rl/core/clock.h"

namespace rl::env {
namespace {

// Echoes the request's arguments back as the output (sed keeps it to /bin/sh and coreutils).
constexpr char kEcho[] =
    "while read -r l; do printf '{\"output\": \"%s\"}\\n' \"$(printf %s \"$l\" | sed 's/.*\"arguments\"://; "
    "s/}$//; s/\"//g')\"; done";

PoolOptions Options(std::map<std::string, std::string> tools, int workers = 2) {
  PoolOptions o;
  o.tools = std::move(tools);
  o.workers = workers;
  o.limits.timeout_ms = 2000;
  o.limits.memory_mb = 256;
  o.limits.max_output_bytes = 4096;
  return o;
}

ToolResult CallTool(WorkerPool& pool, const std::string& name, const std::string& args = "1") {
  std::promise<ToolResult> p;
  auto f = p.get_future();
  pool.Submit({name, args}, [&p](ToolResult r) { p.set_value(std::move(r)); });
  return f.get();
}

TEST(WorkerPoolTest, AnsweredCallsAndToolErrors) {
  WorkerPool pool(Options({{"echo", kEcho}, {"no", "while read -r l; do echo '{\"error\": \"nope\"}'; done"}}));
  ToolResult r = CallTool(pool, "echo", "42");
  EXPECT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.output, "42");
  r = CallTool(pool, "no");
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.kind, kKindToolError);
  EXPECT_EQ(r.error, "nope");
  r = CallTool(pool, "missing");
  EXPECT_EQ(r.kind, kKindUnknownTool);
  EXPECT_NE(r.error.find("echo, no"), std::string::npos) << r.error;
  r = CallTool(pool, "echo", "{not json");
  EXPECT_EQ(r.kind, kKindBadArguments);
}

// Each tool fails its first call (a marker file says it has) and answers from then on: the
// failure is the call's, and the next call gets a fresh process.
std::string FailsOnce(const std::string& dir, const std::string& name, const std::string& failure) {
  std::string marker = dir + "/" + name;
  return "while read -r l; do if [ ! -e " + marker + " ]; then touch " + marker + "; " + failure +
         "; fi; echo '{\"output\": \"fine\"}'; done";
}

TEST(WorkerPoolTest, EveryFailureKindAndTheNextCallSucceeds) {
  std::string dir = ::testing::TempDir() + "/pool-" + std::to_string(::getpid());
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  WorkerPool pool(Options({
                              {"sleepy", FailsOnce(dir, "sleepy", "sleep 60")},
                              {"crash", FailsOnce(dir, "crash", "kill -SEGV $$")},
                              {"exits", FailsOnce(dir, "exits", "exit 3")},
                              {"flood", FailsOnce(dir, "flood", "yes")},
                              {"long", FailsOnce(dir, "long", "head -c 100000 /dev/zero | tr '\\0' x; echo")},
                              {"garbage", FailsOnce(dir, "garbage", "echo 'not json'; continue")},
                              {"twice", FailsOnce(dir, "twice", "printf '{}\\n{}\\n'; continue")},  // in one write
                              {"memory", FailsOnce(dir, "memory", "python3 -c 'bytearray(1 << 30)' || exit 1")},
                          },
                          1));
  struct Case {
    const char* tool;
    const char* kind;
    const char* says;
  };
  for (const Case& c : {Case{"sleepy", kKindTimeout, "no reply within 2 s"},
                        Case{"crash", kKindCrashed, "killed by signal 11 (SIGSEGV)"},
                        Case{"exits", kKindCrashed, "exited with status 3"},
                        Case{"flood", kKindTooLarge, "more than 4096 bytes"},
                        Case{"long", kKindTooLarge, "more than 4096 bytes"},
                        Case{"garbage", kKindMalformed, "'not json'"},
                        Case{"twice", kKindMalformed, "more than one line"},
                        Case{"memory", kKindCrashed, "exited with status 1"}}) {
    int64_t start = MonoMillis();
    ToolResult r = CallTool(pool, c.tool);
    EXPECT_FALSE(r.ok) << c.tool;
    EXPECT_EQ(r.kind, c.kind) << c.tool << ": " << r.error;
    EXPECT_NE(r.error.find(c.says), std::string::npos) << c.tool << ": " << r.error;
    EXPECT_LT(MonoMillis() - start, 4000) << c.tool;
    r = CallTool(pool, c.tool);
    EXPECT_TRUE(r.ok) << c.tool << " after its failure: " << r.kind << ": " << r.error;
    EXPECT_EQ(r.output, "fine");
  }
  ASSERT_EQ(std::system(("rm -rf " + dir).c_str()), 0);
}

TEST(WorkerPoolTest, CallsRunInParallelUpToTheWorkersWithOneProcessPerWorker) {
  // Replies with its pid after 300 ms.
  WorkerPool pool(Options({{"slow", "while read -r l; do sleep 0.3; echo \"{\\\"output\\\": \\\"$$\\\"}\"; done"}}, 2));
  for (int round = 0; round < 2; ++round) {
    int64_t start = MonoMillis();
    std::vector<std::promise<ToolResult>> ps(4);
    for (auto& p : ps) pool.Submit({"slow", "1"}, [&p](ToolResult r) { p.set_value(std::move(r)); });
    std::set<std::string> pids;
    for (auto& p : ps) {
      ToolResult r = p.get_future().get();
      ASSERT_TRUE(r.ok) << r.error;
      pids.insert(r.output);
    }
    int64_t took = MonoMillis() - start;
    EXPECT_GE(took, 550) << "4 calls of 0.3 s on 2 workers take two rounds";
    EXPECT_LT(took, 3000);
    EXPECT_EQ(pids.size(), 2u) << "one persistent process per worker";
  }
}

TEST(WorkerPoolTest, StoppingEndsACallInProgressQuickly) {
  auto pool = std::make_unique<WorkerPool>(Options({{"sleepy", "read -r l; sleep 60"}}, 1));
  bool called = false;
  pool->Submit({"sleepy", "1"}, [&](ToolResult) { called = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  int64_t start = MonoMillis();
  pool.reset();
  EXPECT_LT(MonoMillis() - start, 1000);
  EXPECT_FALSE(called);
}

}  // namespace
}  // namespace rl::env
