#include "rl/profile/ettr.h"

#include <gtest/gtest.h>

namespace rl::profile {
namespace {

// A trainer killed during step 2 whose checkpoint of step 2 was not written: it resumes at step 1
// and redoes step 2. A rollout killed later is restarted alone.
const char* kTrainer = R"({"ts":100.0,"event":"start","step":0,"phase":"start"}
{"ts":100.5,"event":"phase","step":0,"phase":"waiting-for-data"}
{"ts":101.0,"event":"phase","step":0,"phase":"train"}
{"ts":102.0,"event":"step","step":1,"phase":"train"}
{"ts":104.0,"event":"step","step":2,"phase":"train"}
{"ts":107.0,"event":"resume","step":1,"phase":"start"}
{"ts":108.0,"event":"start","step":1,"phase":"start"}
{"ts":110.0,"event":"step","step":2,"phase":"train"}
{"ts":112.0,"event":"step","step":3,"phase":"train"}
{"ts":112.5,"event":"st)";  // torn by a kill

const char* kWatchdog = R"({"ts":99.0,"event":"watch"}
{"ts":105.5,"event":"failure","member":"train/0","kind":"train","fault_ts":105.0,"pipeline_step":2,"reason":"killed by signal 9"}
{"ts":105.5,"event":"decision","member":"train/0","action":"restart-role"}
{"ts":106.0,"event":"ready","member":"train/0"}
{"ts":111.0,"event":"failure","member":"rollout/0","kind":"rollout","fault_ts":110.9,"pipeline_step":2,"reason":"killed by signal 9"}
{"ts":111.0,"event":"decision","member":"rollout/0","action":"restart-role"}
{"ts":111.6,"event":"ready","member":"rollout/0"}
)";

EttrReport Compute() {
  auto run = ParseRunEvents({{"train-0", kTrainer}, {"watchdog-0", kWatchdog}});
  EXPECT_TRUE(run.ok()) << run.status().ToString();
  auto r = ComputeEttr(*run);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

TEST(EttrTest, ProductiveTimeCountsTheLastCompletionOfEachStep) {
  EttrReport r = Compute();
  ASSERT_EQ(r.steps.size(), 3u);
  EXPECT_EQ(r.redone, 1);
  EXPECT_DOUBLE_EQ(r.steps[0].seconds(), 2.0);
  EXPECT_DOUBLE_EQ(r.steps[1].start, 108.0) << "step 2 as redone after the restart";
  EXPECT_DOUBLE_EQ(r.productive, 6.0);
  EXPECT_DOUBLE_EQ(r.wall(), 12.0);
  EXPECT_DOUBLE_EQ(r.ettr(), 0.5);
  EXPECT_DOUBLE_EQ(r.run_s, 13.0);
}

TEST(EttrTest, TimeLostToATrainerFaultSplitsIntoDetectionRestartAndCatchUp) {
  EttrReport r = Compute();
  ASSERT_EQ(r.faults.size(), 2u);
  const FaultTime& f = r.faults[0];
  EXPECT_EQ(f.member, "train/0");
  EXPECT_EQ(f.action, "restart-role");
  EXPECT_DOUBLE_EQ(f.detection, 0.5);
  EXPECT_DOUBLE_EQ(f.restart, 2.5) << "until the trainer's start event, not the watchdog's ready";
  EXPECT_DOUBLE_EQ(f.catch_up, 3.0) << "from the end of step 1, the last kept step before the fault";
  EXPECT_DOUBLE_EQ(f.lost(), r.wall() - r.productive);
}

TEST(EttrTest, ARolloutFaultCostsDetectionAndRestartOnly) {
  EttrReport r = Compute();
  const FaultTime& f = r.faults[1];
  EXPECT_EQ(f.member, "rollout/0");
  EXPECT_NEAR(f.detection, 0.1, 1e-9);
  EXPECT_NEAR(f.restart, 0.6, 1e-9);
  EXPECT_DOUBLE_EQ(f.catch_up, 0.0);
}

TEST(EttrTest, PhasesOfAStepAddUpToItsDuration) {
  EttrReport r = Compute();
  const StepTime& s = r.steps[0];
  EXPECT_DOUBLE_EQ(s.phases.at("start"), 0.5);
  EXPECT_DOUBLE_EQ(s.phases.at("waiting-for-data"), 0.5);
  EXPECT_DOUBLE_EQ(s.phases.at("train"), 1.0);
}

TEST(EttrTest, StepsKeepTheImportanceWeightsTheirEventsReport) {
  auto run = ParseRunEvents({{"train-0", R"({"ts":1.0,"event":"start","step":0}
{"ts":2.0,"event":"step","step":1,"clip_fraction":0.05,"is_weight_mean":1.02,"is_weight_max":3.5,"is_capped_fraction":0.01}
{"ts":3.0,"event":"step","step":2,"clip_fraction":0.0}
)"}});
  ASSERT_TRUE(run.ok());
  auto r = ComputeEttr(*run);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->steps.size(), 2u);
  EXPECT_DOUBLE_EQ(r->steps[0].update.at("is_weight_max"), 3.5);
  EXPECT_DOUBLE_EQ(r->steps[0].update.at("is_capped_fraction"), 0.01);
  EXPECT_EQ(r->steps[1].update.count("is_weight_mean"), 0u);
}

TEST(EttrTest, ARunWithoutATrainerIsNotFound) {
  auto run = ParseRunEvents({{"rollout-0", R"({"ts":1,"event":"start"})"}});
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(ComputeEttr(*run).status().code(), Code::kNotFound);
  EXPECT_EQ(ParseRunEvents({{"x", "nonsense\n{\"ts\":1,\"event\":\"a\"}\n"}}).status().message(),
            "x.jsonl line 1 is not an event line");
  EXPECT_EQ(ParseRunEvents({{"x", "{\"ts\":1,\"event\":5}\n{\"ts\":2,\"event\":\"a\"}\n"}}).status().message(),
            "x.jsonl line 1 is not an event line")
      << "an event that is not a string";
}

// Fields of the wrong type (a hand-edited log, another tool's) read as absent: they used to end
// rl-profile with nlohmann's type_error.
TEST(EttrTest, FieldsOfTheWrongTypeReadAsAbsent) {
  const char* watchdog = R"({"ts":99.0,"event":"watch"}
{"ts":105.5,"event":"failure","member":7,"kind":["train"],"fault_ts":"105","pipeline_step":2.5,"reason":null}
{"ts":105.5,"event":"decision","member":"train/0","action":{"a":1}}
{"ts":106.0,"event":"ready","member":"train/0"}
)";
  auto run = ParseRunEvents({{"train-0", kTrainer}, {"watchdog-0", watchdog}, {"x", R"({"ts":1,"event":"a","phase":3,"step":"2"})"}});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->lanes["x"][0].phase, "");
  EXPECT_EQ(run->lanes["x"][0].step, 0);
  auto r = ComputeEttr(*run);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->faults.size(), 1u);
  EXPECT_EQ(r->faults[0].member, "");
  EXPECT_EQ(r->faults[0].kind, "");
  EXPECT_EQ(r->faults[0].step, -1);
  EXPECT_DOUBLE_EQ(r->faults[0].fault_ts, 105.5) << "no fault_ts: the failure event's own time";
}

}  // namespace
}  // namespace rl::profile
