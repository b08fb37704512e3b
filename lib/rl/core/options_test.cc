#include "rl/core/options.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>

namespace rl {
namespace {

TEST(OptionTableTest, NoTwoOptionsShareAFlagForOneToolOrAnEnvironmentVariable) {
  std::set<std::string> flags, envs;
  for (const auto& spec : OptionTable()) {
    for (const auto& tool : spec.tools) {
      EXPECT_TRUE(flags.insert(spec.flag + " " + tool).second) << "duplicate flag " << spec.flag << " for " << tool;
    }
    if (!spec.env.empty()) { EXPECT_TRUE(envs.insert(spec.env).second) << "duplicate env " << spec.env; }
    EXPECT_EQ(spec.flag.rfind("--", 0), 0u) << spec.flag;
    EXPECT_FALSE(spec.help.empty()) << spec.flag;
    EXPECT_FALSE(spec.tools.empty()) << spec.flag;
    if (!spec.env.empty()) { EXPECT_EQ(spec.env.rfind("RL_", 0), 0u) << spec.env; }
  }
}

TEST(OptionTableTest, AFlagWithEntriesPerToolReadsEachToolsOwnVariable) {
  EXPECT_EQ(FindOption("--bind", "rl-queue serve")->env, "RL_QUEUE_BIND");
  EXPECT_EQ(FindOption("--bind", "rl-env serve")->env, "RL_ENV_BIND");
  EXPECT_EQ(FindOption("--bind", "rl-nothing"), nullptr);
  EXPECT_NE(FindOption("--bind"), nullptr);
}

struct Parsed {
  std::optional<int> exit;
  std::string dir;
};

Parsed ParseServe(std::vector<std::string> args) {
  CommandLine cl("rl-queue", "test");
  CLI::App* serve = cl.Sub("serve", "serve");
  Parsed p;
  p.dir = "default";
  cl.Bind(serve, "--dir", &p.dir);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  p.exit = cl.Parse(static_cast<int>(argv.size()), argv.data());
  return p;
}

TEST(CommandLineTest, CommandLineBeatsEnvironmentBeatsConfigFile) {
  std::string cfg = ::testing::TempDir() + "/opts.toml";
  std::ofstream(cfg) << "dir = \"from-file\"\n";
  ::unsetenv("RL_QUEUE_DIR");
  EXPECT_EQ(ParseServe({"rl-queue", "serve"}).dir, "default");
  EXPECT_EQ(ParseServe({"rl-queue", "serve", "--config", cfg}).dir, "from-file");
  ::setenv("RL_QUEUE_DIR", "from-env", 1);
  EXPECT_EQ(ParseServe({"rl-queue", "serve", "--config", cfg}).dir, "from-env");
  EXPECT_EQ(ParseServe({"rl-queue", "serve", "--config", cfg, "--dir", "from-cli"}).dir, "from-cli");
  EXPECT_EQ(ParseServe({"rl-queue", "serve", "--dir=from-cli"}).dir, "from-cli");
  ::unsetenv("RL_QUEUE_DIR");
}

TEST(CommandLineTest, RequiredOptionMayComeFromTheEnvironment) {
  CommandLine cl("rl-queue", "test");
  CLI::App* serve = cl.Sub("serve", "serve");
  CLI::App* put = cl.Sub("put", "put");
  std::string dir;
  size_t batch = 64;
  cl.Require(cl.Bind(serve, "--dir", &dir));
  cl.Bind(put, "--batch", &batch);
  ::setenv("RL_QUEUE_DIR", "/tmp/x", 1);
  ::setenv("RL_PUT_BATCH", "not-a-number", 1);  // put's variable: serve must not read it
  std::vector<std::string> args = {"rl-queue", "serve"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto exit = cl.Parse(static_cast<int>(argv.size()), argv.data());
  ::unsetenv("RL_QUEUE_DIR");
  ::unsetenv("RL_PUT_BATCH");
  EXPECT_FALSE(exit.has_value());
  EXPECT_EQ(dir, "/tmp/x");
}

TEST(CommandLineTest, MissingRequiredOptionIsAUsageError) {
  ::unsetenv("RL_QUEUE_DIR");
  CommandLine cl("rl-queue", "test");
  CLI::App* serve = cl.Sub("serve", "serve");
  std::string dir;
  cl.Require(cl.Bind(serve, "--dir", &dir));
  std::vector<std::string> args = {"rl-queue", "serve"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  EXPECT_EQ(cl.Parse(static_cast<int>(argv.size()), argv.data()).value_or(0), 64);
}

TEST(CommandLineTest, UnknownOptionIsAUsageError) {
  Parsed p = ParseServe({"rl-queue", "serve", "--no-such-flag"});
  ASSERT_TRUE(p.exit.has_value());
  EXPECT_EQ(*p.exit, 64);
}

}  // namespace
}  // namespace rl
