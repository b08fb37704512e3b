// Fitting plan costs to event logs: coefficients known in advance come back out, malformed
// events are refused with the lane named, and the modes' names go both ways.
#include "rl/profile/plan_fit.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace rl::profile {
namespace {

std::string Line(double ts, const std::string& event, const std::string& fields) {
  const std::string rest = fields.empty() ? "" : "," + fields;
  return "{\"ts\":" + std::to_string(ts) + ",\"event\":\"" + event + "\"" + rest + "}\n";
}

// A sync run whose rollout batches cost 0.02 s/round + 0.001 s/token + 0.0005 s/row, reward
// batches 0.01 s + 0.0001 s/row, training 0.05 s + 0.002 s/token; steps 1.5 s apart.
std::map<std::string, std::string> Lanes() {
  std::string train = Line(0, "start", "\"staleness\":0,\"start_fraction\":1,\"prompts_per_step\":32,"
                                       "\"group_size\":8,\"micro_batch\":64");
  std::string rollout, reward;
  for (int i = 0; i < 10; ++i) {
    const double t = 1.5 * (i + 1), rows = 128 + 64 * (i % 3), rounds = 6 + i % 4, tokens = rows * (3 + i % 2);
    char buf[400];
    std::snprintf(buf, sizeof buf,
                  "\"rows\":%g,\"tokens\":%g,\"rounds\":%g,\"seconds\":%.9g,\"prompt_tokens\":%g,"
                  "\"lengths\":[1,2,%d,4,%g]",
                  rows, tokens, rounds, 0.02 * rounds + 0.001 * tokens + 0.0005 * rows, 10 * rows, 3 + i % 2, rounds);
    rollout += Line(t - 1, "batch", buf);
    std::snprintf(buf, sizeof buf, "\"rows\":%g,\"seconds\":%.9g", rows, 0.01 + 0.0001 * rows);
    reward += Line(t - 0.5, "batch", buf);
    const double train_tokens = 700 + 100 * (i % 5);
    std::snprintf(buf, sizeof buf,
                  "\"tokens\":%g,\"train_seconds\":%.9g,\"samples\":256,\"uniform_rows\":%d,\"eval_seconds\":%g",
                  train_tokens, 0.05 + 0.002 * train_tokens, i % 2 ? 256 : 0, i % 5 == 0 ? 0.5 : 0.0);
    train += Line(t, "step", buf);
    train += Line(t + 0.01, "snapshot", "\"version\":" + std::to_string(i + 1) + ",\"seconds\":0.02");
    train += Line(t + 0.11, "checkpoint", "\"version\":" + std::to_string(i + 1));
    rollout += Line(t + 0.04, "weights", "\"version\":" + std::to_string(i + 1));
  }
  return {{"train-0", train}, {"rollout-0", rollout}, {"reward-0", reward}};
}

TEST(PlanFitTest, RecoversTheCostsARunWasMadeWith) {
  auto run = ParseRunEvents(Lanes());
  ASSERT_TRUE(run.ok());
  auto fit = FitRun(*run, 2);
  ASSERT_TRUE(fit.ok()) << fit.status().ToString();
  const PlanCosts& c = fit->costs;
  EXPECT_NEAR(c.gen_round_s, 0.02, 1e-6);
  EXPECT_NEAR(c.gen_token_s, 0.001, 1e-7);
  EXPECT_NEAR(c.gen_row_s, 0.0005, 1e-7);
  EXPECT_NEAR(c.reward_batch_s, 0.01, 1e-7);
  EXPECT_NEAR(c.reward_row_s, 0.0001, 1e-9);
  EXPECT_NEAR(c.train_step_s, 0.05, 1e-6);
  EXPECT_NEAR(c.train_token_s, 0.002, 1e-8);
  EXPECT_NEAR(c.post_s, 0.1 + 0.02, 1e-9);  // evaluations 0.5 s every 5 steps, snapshots 0.02 s
  EXPECT_NEAR(c.write_s, 0.1, 1e-6);
  EXPECT_NEAR(c.sync_s, 0.03, 1e-6);
  EXPECT_NEAR(c.prompt_tokens, 10, 1e-9);
  EXPECT_NEAR(c.lengths[0], 1, 1e-9);
  EXPECT_NEAR(c.lengths[4], 7.3, 1e-9);  // max: the rounds 6, 7, 8, 9, 6, 7, 8, 9, 6, 7
  const RunMeasure& m = fit->run;
  EXPECT_EQ(m.config.mode, "sync");
  EXPECT_EQ(m.config.rollouts, 1);
  EXPECT_EQ(m.shape.prompts_per_step, 32);
  EXPECT_EQ(m.shape.micro_batch, 64);
  EXPECT_EQ(m.shape.rollout_rows, 256);
  EXPECT_NEAR(m.shape.keep, 2560.0 / (2560 + 5 * 256), 1e-9);
  EXPECT_EQ(m.steps, 10);
  EXPECT_NEAR(m.step_s, 1.5, 1e-6);
}

TEST(PlanFitTest, RefusesARunWithoutTheEventsItNeeds) {
  auto lanes = Lanes();
  lanes.erase("reward-0");
  auto run = ParseRunEvents(lanes);
  ASSERT_TRUE(run.ok());
  auto fit = FitRun(*run, 2);
  EXPECT_EQ(fit.status().code(), Code::kDataError);
  EXPECT_NE(fit.status().message().find("no reward batch events"), std::string::npos);

  lanes = Lanes();
  lanes["rollout-0"] += Line(99, "batch", "\"rows\":8,\"tokens\":8,\"seconds\":1,\"prompt_tokens\":8");
  run = ParseRunEvents(lanes);
  ASSERT_TRUE(run.ok());
  fit = FitRun(*run, 2);
  EXPECT_EQ(fit.status().code(), Code::kDataError);
  EXPECT_NE(fit.status().message().find("rollout-0: a batch event has no number rounds"), std::string::npos);

  EXPECT_EQ(FitRun(*run, 20).status().code(), Code::kDataError);  // 10 steps, warm-up 20
}

TEST(PlanFitTest, NonNegativeFitDropsAColumnThatWouldGoNegative) {
  // y = 2 x0 exactly, x1 anti-correlated noise: plain least squares gives x1 a negative weight.
  std::vector<std::vector<double>> x = {{1, 3}, {2, 1}, {3, 2}, {4, 0}};
  std::vector<double> y = {2, 4, 6, 8};
  auto b = NonNegativeFit(x, y);
  EXPECT_NEAR(b[0], 2, 1e-12);
  EXPECT_EQ(b[1], 0);
}

TEST(PlanFitTest, ModesByName) {
  PlanConfig c;
  ASSERT_TRUE(ParseMode("async-k2", &c).ok());
  EXPECT_EQ(c.staleness, 2);
  EXPECT_EQ(c.start_fraction, 0);
  EXPECT_EQ(ModeName(2, 0), "async-k2");
  EXPECT_EQ(ModeName(1, 0.5), "semi-sync");
  EXPECT_EQ(ModeName(0, 1), "sync");
  EXPECT_EQ(ModeName(1, 0.25), "k=1,f=0.25");
  EXPECT_FALSE(ParseMode("async-k0", &c).ok());
  EXPECT_FALSE(ParseMode("fast", &c).ok());
  EXPECT_FALSE(ParseMode("async-kx", &c).ok());
}

TEST(PlanFitTest, DecodeProfileTakesTheTp1PointsAndRefusesMalformedOnes) {
  const std::string path = ::testing::TempDir() + "/plan_decode.json";
  std::ofstream(path) << R"({"decode": [[1, 1, 10, 0.01], [1, 8, 80, 0.02], [2, 8, 80, 0.5]],
                            "prefill": [[1, 10, 0.001], [1, 20, 0.002]], "switch": {}})";
  auto t = LoadDecodeTable(path);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->by_batch.size(), 2u);
  EXPECT_NEAR(t->Round(8, 80), 0.02, 1e-12);
  EXPECT_NEAR(t->prefill_token_s, 0.0001, 1e-12);
  std::ofstream(path) << R"({"decode": [[1, 1, 0.01]]})";
  EXPECT_EQ(LoadDecodeTable(path).status().code(), Code::kDataError);
  for (const char* point : {"[1, 1e300, 10, 0.01]", "[1, 2.5, 10, 0.01]", "[1, 0, 10, 0.01]", "[1, 4, -1, 0.01]",
                            "[1, 4, 10, 0]", "[1, 4, 10, \"0.1\"]"}) {
    auto r = ParseDecodeTable(std::string(R"({"decode": [)") + point + "]}", "p.json");
    EXPECT_EQ(r.status().code(), Code::kDataError) << point;
    EXPECT_NE(r.status().message().find("p.json"), std::string::npos) << r.status().ToString();
  }
  std::ofstream(path) << "not json";
  EXPECT_EQ(LoadDecodeTable(path).status().code(), Code::kDataError);
  EXPECT_EQ(LoadDecodeTable(path + ".missing").status().code(), Code::kIOError);
}

}  // namespace
}  // namespace rl::profile
