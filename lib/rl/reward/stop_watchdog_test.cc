#include "rl/reward/stop_watchdog.h"

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

TEST(StopWatchdogTest, NeverFiresOutsideQueueCallsOrWithoutAStop) {
  std::atomic<bool> stop{false};
  {
    StopWatchdog w(stop, 50, "rl-test");
    {
      StopWatchdog::Call c(&w);  // a long call, but no stop
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    stop = true;  // a stop, but no call in progress (generating, say)
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  StopWatchdog::Call null_watchdog(nullptr);
  SUCCEED();
}

}  // namespace
}  // namespace rl
