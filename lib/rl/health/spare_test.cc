// The activation message a spare waits for, and a real spare process: held until activated,
// then it goes on with the environment it was given; gone when its pipe closes unused.
#include "rl/health/spare.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

namespace rl::health {
namespace {

TEST(SpareActivationTest, EncodeThenDecodeGivesTheEnvironmentBack) {
  std::map<std::string, std::string> env = {{"RL_ID", "3"}, {"RL_X", "a=b c"}};
  auto back = DecodeActivation(EncodeActivation(env));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, env);
}

TEST(SpareActivationTest, AMessageWithoutItsEndOrWithABadLineIsRejected) {
  EXPECT_EQ(DecodeActivation("RL_ID=3\n").status().code(), Code::kDataError);
  EXPECT_EQ(DecodeActivation("RL_ID\n\n").status().code(), Code::kDataError);
  EXPECT_EQ(DecodeActivation("=3\n\n").status().code(), Code::kDataError);
  EXPECT_TRUE(DecodeActivation("\n").ok());
}

// Forks a "spare" that calls WaitIfSpare and then exits with RL_ID as its status.
pid_t ForkSpare(int* write_fd) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[1]);
    ::setenv(kSpareFdEnv, std::to_string(fds[0]).c_str(), 1);
    WaitIfSpare();
    const char* id = std::getenv("RL_ID");
    ::_exit(id ? 40 + std::atoi(id) : 99);
  }
  ::close(fds[0]);
  *write_fd = fds[1];
  return pid;
}

int ExitStatusOf(pid_t pid) {
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(SpareTest, ASpareIsHeldUntilActivatedThenGoesOnAsTheInstanceItWasGiven) {
  int fd = -1;
  pid_t pid = ForkSpare(&fd);
  ::usleep(100 * 1000);
  int status = 0;
  EXPECT_EQ(::waitpid(pid, &status, WNOHANG), 0) << "a spare must wait";
  std::string m = EncodeActivation({{"RL_ID", "2"}});
  ASSERT_EQ(::write(fd, m.data(), m.size()), static_cast<ssize_t>(m.size()));
  ::close(fd);
  EXPECT_EQ(ExitStatusOf(pid), 42);
}

TEST(SpareTest, ASpareWhosePipeClosesUnusedExitsWithoutStartingWork) {
  int fd = -1;
  pid_t pid = ForkSpare(&fd);
  ::close(fd);
  EXPECT_EQ(ExitStatusOf(pid), 0);
}

}  // namespace
}  // namespace rl::health
