#include "rl/health/process.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace rl::health {
namespace {

char StateOf(pid_t pid) {
  std::vector<std::string> f = StatFields(pid);
  return f.empty() || f[0].empty() ? '?' : f[0][0];
}

void* SleepThenEnd(void*) {
  ::usleep(800 * 1000);
  return nullptr;  // the last thread: the process exits with status 0
}

// A child whose main thread ends first: it is a zombie while the other thread still runs and
// still holds the process's files. That is not gone; it is once the last thread has ended.
TEST(ProcessGoneTest, AZombieMainThreadWithAnotherThreadRunningIsNotGone) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pthread_t t;
    if (::pthread_create(&t, nullptr, SleepThenEnd, nullptr) != 0) ::_exit(1);
    // Ends this thread only (the exit system call, not exit_group). Not pthread_exit: its
    // unwinding would meet the test's catch-all.
    ::syscall(SYS_exit, 0);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (StateOf(pid) != 'Z' && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(StateOf(pid), 'Z') << "the main thread did not end";
  EXPECT_FALSE(ProcessGone(pid)) << "the second thread still runs";
  while (!ProcessGone(pid) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(ProcessGone(pid));
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << DescribeWaitStatus(status);
}

TEST(ProcessGoneTest, ARunningProcessIsNotGoneAndAReapedOneIs) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  EXPECT_FALSE(ProcessGone(pid));
  StopProcess(pid, 0);
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_TRUE(ProcessGone(0));
}

}  // namespace
}  // namespace rl::health
