#include "rl/core/stop_watchdog.h"

#include <gtest/gtest.h>

namespace rl {
namespace {

TEST(StopWatchdogDeathTest, EndsTheProcessWhenAQueueCallOutlastsTheGraceAfterAStop) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        std::atomic<bool> stop{true};
        StopWatchdog w(stop, 200, "rl-test");
        StopWatchdog::Call c(&w);
        std::this_thread::sleep_for(std::chrono::seconds(5));
      },
      ::testing::ExitedWithCode(kExitTempFail), "rl-test: stopping: the queue does not answer");
}

// In a child process, so that a watchdog that fires shows as this test failing (exit 75 and its
// line on stderr instead of exit 0), not as the whole test binary ending.
TEST(StopWatchdogDeathTest, NeverFiresOutsideQueueCallsOrWithoutAStop) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_EXIT(
      {
        std::atomic<bool> stop{false};
        {
          StopWatchdog w(stop, 50, "rl-test");
          {
            StopWatchdog::Call c(&w);  // a long call, but no stop
            std::this_thread::sleep_for(std::chrono::milliseconds(400));
          }
          stop = true;  // a stop, but no call in progress (generating, say)
          std::this_thread::sleep_for(std::chrono::milliseconds(400));
        }
        StopWatchdog::Call null_watchdog(nullptr);  // unwatched: nothing to mark
        std::fprintf(stderr, "survived\n");
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "^survived\n$");
}

}  // namespace
}  // namespace rl
