// The latency model of adaptive tensor parallelism (latency_model.h) on profiles written out:
// interpolation, scaling, JSON round trips and malformed files; and the calibration that follows
// measured rounds.
#include "rl/dist/latency_model.h"

#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

namespace rl::dist {
namespace {

TEST(LatencyModelTest, InterpolatesInContextAndBatchAndRoundTripsAsJson) {
  std::vector<DecodePoint> d{{1, 1, 0, 1.0}, {1, 1, 100, 2.0}, {1, 1, 300, 3.0},
                             {1, 8, 0, 3.0}, {1, 8, 100, 6.0}};
  auto m = LatencyModel::Create(d, {{1, 10, 0.5}, {1, 20, 1.5}}, {1e6, 0.25, 100});
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ(m->Step(1, 1, 50), 1.5);    // within a segment
  EXPECT_DOUBLE_EQ(m->Step(1, 1, 200), 2.5);   // the next segment
  EXPECT_DOUBLE_EQ(m->Step(1, 1, 500), 4.0);   // extrapolated along the last one
  EXPECT_DOUBLE_EQ(m->Step(1, 8, 50), 4.5);
  EXPECT_DOUBLE_EQ(m->Step(1, 4, 50), 1.5 + (4.5 - 1.5) * 3 / 7);  // between batch sizes
  EXPECT_DOUBLE_EQ(m->Prefill(1, 15), 1.0);
  // Two replicas: (length, budget). The slowest decides: 3 steps of one sequence at lengths
  // 10, 11, 12 against 1 step of two.
  EXPECT_DOUBLE_EQ(m->Remaining(1, {{{10, 3}}, {{5, 1}, {5, 1}}}),
                   m->Step(1, 1, 10) + m->Step(1, 1, 11) + m->Step(1, 1, 12));
  auto back = LatencyModel::FromJson(m->ToJson());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->ToJson(), m->ToJson());
}

TEST(LatencyModelTest, MalformedProfilesAreDataErrors) {
  for (const char* text : {R"([])", R"({"decode": [], "prefill": [], "switch": {}})",
                           R"({"decode": [[1, 1, 0]], "prefill": [], "switch": {}})",
                           R"({"decode": [[1, 1, 0, -1]], "prefill": [[1, 1, 1]],
                               "switch": {"gather_bytes_per_s": 1, "reshard_s": 0, "kv_bytes_per_token": 1}})",
                           R"({"decode": [[1, 1, 0, 1]], "prefill": [[2, 1, 1]],
                               "switch": {"gather_bytes_per_s": 1, "reshard_s": 0, "kv_bytes_per_token": 1}})",
                           R"({"decode": [["x", 1, 0, 1]], "prefill": [], "switch": {}})"}) {
    auto m = LatencyModel::FromJson(nlohmann::json::parse(text));
    EXPECT_EQ(m.status().code(), Code::kDataError) << text;
  }
}

TEST(LatencyModelTest, ScaledStretchesComputeTimesNotTheSwitchCosts) {
  std::vector<DecodePoint> d;  // degree 2 1.8 times faster than 1, at batches 1 and 4, contexts 0 and 400
  for (int tp : {1, 2}) {
    for (int64_t b : {1, 4}) {
      for (int64_t t : {0, 400}) d.push_back({tp, b, t, (0.01 + 0.002 * b + 1e-5 * t) / (tp == 2 ? 1.8 : 1.0)});
    }
  }
  auto m = LatencyModel::Create(d, {{1, 1, 0.001}, {1, 64, 0.01}, {2, 1, 0.001}, {2, 64, 0.006}}, {1e9, 0.25, 1024});
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  const LatencyModel twice = m->Scaled(2);
  EXPECT_DOUBLE_EQ(twice.Step(1, 4, 200), 2 * m->Step(1, 4, 200));
  EXPECT_DOUBLE_EQ(twice.Prefill(2, 30), 2 * m->Prefill(2, 30));
  EXPECT_EQ(twice.ToJson()["switch"], m->ToJson()["switch"]);
}

TEST(LatencyCalibrationTest, FollowsTheRatioOfMeasuredToProfiledTime) {
  LatencyCalibration c(4);
  EXPECT_EQ(c.scale(), 1.0);
  for (int i = 0; i < 10; ++i) c.Observe(0.5, 0.6);
  EXPECT_NEAR(c.scale(), 1.2, 1e-12);
  for (double bad : {0.0, -1.0, std::nan("")}) {
    c.Observe(bad, 5);
    c.Observe(0.5, bad);
  }
  EXPECT_NEAR(c.scale(), 1.2, 1e-12) << "bad observations are ignored";
  c.Observe(0.5, 0.5);  // one outlier moves it a little only
  EXPECT_GT(c.scale(), 1.1);
  for (int i = 0; i < 40; ++i) c.Observe(0.5, 0.5);  // ten half-lives of the machine back at speed
  EXPECT_NEAR(c.scale(), 1.0, 0.01);
}

}  // namespace
}  // namespace rl::dist
