#include "rl/core/fail.h"

#include <gtest/gtest.h>

namespace rl {
namespace {

TEST(FailTest, PrintsToolAndMessageOnOneLineAndReturnsTheSysexitsCodeOfTheStatus) {
  struct Case {
    Status status;
    int code;
  };
  const Case cases[] = {
      {Status::InvalidArgument("bad flag"), 64}, {Status::DataError("bad line"), 65},
      {Status::Corruption("bad crc"), 65},       {Status::Unavailable("no peer"), 69},
      {Status::Internal("bug"), 70},             {Status::IOError("disk"), 74},
      {Status::Timeout("slow"), 75},             {Status::Protocol("frame"), 76},
      {Status::Config("toml"), 78},
  };
  for (const Case& c : cases) {
    ::testing::internal::CaptureStderr();
    int code = Fail("rl-test", c.status);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "rl-test: " + c.status.message() + "\n");
    EXPECT_EQ(code, c.code) << c.status.ToString();
  }
}

}  // namespace
}  // namespace rl
