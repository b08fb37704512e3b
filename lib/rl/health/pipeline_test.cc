#include "rl/health/pipeline.h"

#include <gtest/gtest.h>

namespace rl::health {
namespace {

TEST(PipelineTest, ReadsWatchdogSettingsAndRolesInFileOrder) {
  auto p = ParsePipeline(R"(
[watchdog]
heartbeat = "tcp://127.0.0.1:7000"
heartbeat_interval = 0.5
max_full_restarts = 2
restart = "job"
standby = true

[role.queue]
command = "rl-queue serve --dir q --declare generate=prompt_ids"

[role.rollout]
kind = "rollout"
command = "rl-rollout run --checkpoint-dir 'c k'"
count = 2
stall = 90

[role.trainer]
kind = "train"
command = "rl-train grpo"
)", "p.toml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->heartbeat, "tcp://127.0.0.1:7000");
  EXPECT_DOUBLE_EQ(p->interval_s, 0.5);
  EXPECT_EQ(p->max_full_restarts, 2);
  EXPECT_EQ(p->restart, "job");
  EXPECT_TRUE(p->standby);
  ASSERT_EQ(p->roles.size(), 3u);
  EXPECT_EQ(p->roles[0].kind, "queue");
  EXPECT_EQ(p->roles[0].command, "rl-queue serve --dir q --declare generate=prompt_ids");
  EXPECT_FALSE(p->roles[0].finish);
  EXPECT_EQ(p->roles[1].count, 2);
  EXPECT_EQ(p->roles[1].command, "rl-rollout run --checkpoint-dir 'c k'");
  EXPECT_DOUBLE_EQ(p->roles[1].stall_s, 90);
  EXPECT_EQ(p->roles[2].name, "trainer");
  EXPECT_TRUE(p->roles[2].finish) << "a trainer's clean exit ends the pipeline by default";
}

TEST(PipelineTest, UnknownKeysAndMissingCommandsAreConfigErrors) {
  auto p = ParsePipeline("[role.a]\ncommand = \"x\"\ncolour = \"red\"\n", "p.toml");
  EXPECT_EQ(p.status().code(), Code::kConfig);
  EXPECT_EQ(p.status().message(), "p.toml: unknown key 'colour' in [role.a]");
  EXPECT_EQ(ParsePipeline("[role.a]\ncount = 2\n", "p.toml").status().message(), "p.toml: [role.a] has no command");
  EXPECT_EQ(ParsePipeline("[watchdog]\nmissed = x\n[role.a]\ncommand = \"x\"\n", "p.toml").status().code(),
            Code::kConfig);
}

// Names and kinds become file names and state.json keys: a path, a space or bytes that are not
// UTF-8 (state.json could not be written) are refused.
TEST(PipelineTest, NamesAndKindsArePlainWords) {
  EXPECT_TRUE(ParsePipeline("[role.roll_out-2]\ncommand = \"x\"\n", "p.toml").ok());
  EXPECT_EQ(ParsePipeline("[role.a]\nkind = \"../x\"\ncommand = \"x\"\n", "p.toml").status().message(),
            "p.toml: role kind \"../x\": names and kinds are 1 to 64 letters, digits, '_' or '-'");
  auto bad = ParsePipeline("[role.tr\xff]\ncommand = \"x\"\n", "p.toml");
  EXPECT_EQ(bad.status().code(), Code::kConfig);
  EXPECT_NE(bad.status().message().find("role name"), std::string::npos) << bad.status().message();
  EXPECT_EQ(ParsePipeline("[role.a]\nkind = \"\"\ncommand = \"x\"\n", "p.toml").status().code(), Code::kConfig);
}

TEST(PipelineTest, TwoTablesOfOneKindAreAConfigError) {
  // Both would number their instances from 0: two processes heartbeating as rollout/0.
  std::string toml = "[role.fast]\nkind = \"rollout\"\ncommand = \"x\"\n[role.train]\ncommand = \"t\"\n"
                     "[role.slow]\nkind = \"rollout\"\ncommand = \"y\"\n";
  auto p = ParsePipeline(toml, "p.toml");
  EXPECT_EQ(p.status().code(), Code::kConfig);
  EXPECT_EQ(p.status().message(), "p.toml: [role.slow] and [role.fast] are both of kind 'rollout', and their "
                                  "instances would share the ids from 0; use one table with count");
  // A table named like another's kind counts as that kind.
  p = ParsePipeline("[role.rollout]\ncommand = \"x\"\n[role.more]\nkind = \"rollout\"\ncommand = \"y\"\n", "p.toml");
  EXPECT_EQ(p.status().code(), Code::kConfig);
  EXPECT_TRUE(ParsePipeline("[role.a]\nkind = \"rollout\"\ncommand = \"x\"\n[role.b]\nkind = \"reward\"\ncommand = \"y\"\n",
                            "p.toml").ok());
}

TEST(PipelineTest, SlotsAndAPlacementBetweenTwoRoles) {
  auto p = ParsePipeline(R"(
[watchdog]
slots = ["cpus=0", "cpus=0", "cpus=0", "cpus=0"]
[placement]
between = ["rollout", "reward"]
every = 50
settle = 1
measure = 3
[role.rollout]
command = "r"
count = 1
slots = 1
[role.reward]
command = "j"
count = 2
slots = 1
[role.train]
command = "t"
slots = 1
)", "p.toml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->slots.size(), 4u);
  EXPECT_EQ(p->placement.between, (std::vector<std::string>{"rollout", "reward"}));
  EXPECT_EQ(p->placement.every, 50);
  EXPECT_EQ(p->placement.settle, 1);
  EXPECT_EQ(p->placement.measure, 3);
  EXPECT_EQ(p->roles[0].slots, 1);
}

TEST(PipelineTest, SlotMistakesAreConfigErrorsThatSayWhat) {
  auto error = [](const std::string& toml) {
    auto p = ParsePipeline(toml, "p.toml");
    EXPECT_EQ(p.status().code(), Code::kConfig) << toml;
    return p.status().message();
  };
  const std::string roles = "[role.rollout]\ncommand = \"r\"\nslots = 1\n[role.reward]\ncommand = \"j\"\nslots = 1\n";
  EXPECT_EQ(error("[watchdog]\nslots = [\"cpus=0\"]\n" + roles),
            "p.toml: the roles' instances want 2 slots and [watchdog] slots has 1");
  EXPECT_EQ(error("[watchdog]\nslots = [\"cpu=0\", \"cpus=0\"]\n" + roles),
            "p.toml: [watchdog] slot 'cpu=0': 'cpu=0' is not cpus=LIST, gpus=LIST or quota=CPUS");
  EXPECT_NE(error("[watchdog]\nslots = [\"cpus=0\", \"cpus=9999\"]\n" + roles).find("CPU 9999"), std::string::npos);
  const std::string slots = "[watchdog]\nslots = [\"cpus=0\", \"cpus=0\", \"cpus=0\"]\n";
  EXPECT_EQ(error(slots + "[placement]\nbetween = [\"rollout\"]\n" + roles),
            "p.toml: [placement] between wants two different role kinds");
  EXPECT_EQ(error(slots + "[placement]\nbetween = [\"rollout\", \"judge\"]\n" + roles),
            "p.toml: [placement] between names 'judge', no role's kind");
  EXPECT_EQ(error(slots + "[placement]\nbetween = [\"rollout\", \"reward\"]\nmeasure = 0\n" + roles),
            "p.toml: [placement] settle >= 0, measure >= 1 and every >= 0 are required");
  EXPECT_EQ(error(slots + "[placement]\nbetween = [\"rollout\", \"reward\"]\n[role.rollout]\ncommand = \"r\"\n"
                          "[role.reward]\ncommand = \"j\"\nslots = 1\n"),
            "p.toml: [placement] moves slots one at a time: [role.rollout] needs slots = 1, count >= 1, no spares and no group");
  EXPECT_NE(error("[watchdog]\nslots = [\"gpus=0\"]\n[role.train]\ncommand = \"t\"\nslots = 1\nspares = 1\n")
                .find("a spare's CUDA devices are fixed"),
            std::string::npos);
  EXPECT_NE(error("[placement]\ncolour = 1\n" + roles).find("unknown key 'colour' in [placement]"), std::string::npos);
}

TEST(PipelineTest, AGroupRoleIsReadAndTakesNoSpares) {
  auto p = ParsePipeline("[role.train]\ncommand = \"t\"\ncount = 2\ngroup = true\n", "p.toml");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_TRUE(p->roles[0].group);
  EXPECT_EQ(p->roles[0].count, 2);
  EXPECT_FALSE(ParsePipeline("[role.train]\ncommand = \"t\"\n", "p.toml")->roles[0].group);
  EXPECT_EQ(ParsePipeline("[role.train]\ncommand = \"t\"\ngroup = yes\n", "p.toml").status().message(),
            "p.toml: group wants true or false");
  EXPECT_EQ(ParsePipeline("[role.train]\ncommand = \"t\"\ngroup = true\nspares = 1\n", "p.toml").status().message(),
            "p.toml: [role.train] is a group: spares cannot stand in for one of its ranks");
}

}  // namespace
}  // namespace rl::health
