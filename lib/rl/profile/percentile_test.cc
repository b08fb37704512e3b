#include "rl/profile/percentile.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <random>

#include "rl/profile/report.h"

namespace rl::profile {
namespace {

TEST(PercentileTest, NoSamplesGiveZero) {
  std::vector<double> none;
  EXPECT_EQ(Percentile(&none, 0.5), 0);
}

TEST(PercentileTest, OneSampleIsEveryPercentile) {
  std::vector<double> one = {7};
  EXPECT_EQ(Percentile(&one, 0), 7);
  EXPECT_EQ(Percentile(&one, 0.5), 7);
  EXPECT_EQ(Percentile(&one, 1), 7);
}

TEST(PercentileTest, NearestRankOfShuffledSamples) {
  std::vector<double> s;
  for (int i = 1; i <= 100; ++i) s.push_back(i);
  std::shuffle(s.begin(), s.end(), std::mt19937(1));
  EXPECT_EQ(Percentile(&s, 0.50), 50);
  EXPECT_EQ(Percentile(&s, 0.99), 99);
  EXPECT_EQ(Percentile(&s, 1.0), 100);
  EXPECT_EQ(Percentile(&s, 0.0), 1);
  EXPECT_EQ(Percentile(&s, 0.001), 1);
}

TEST(PercentileTest, SmallSetsRoundTheRankUp) {
  std::vector<double> s = {40, 10, 30, 20};
  EXPECT_EQ(Percentile(&s, 0.5), 20);   // rank ceil(2.0) = 2
  EXPECT_EQ(Percentile(&s, 0.51), 30);  // rank ceil(2.04) = 3
  EXPECT_EQ(Percentile(&s, 0.99), 40);
}

TEST(OpFigureTest, RowsPerSecondIsZeroWithoutTime) {
  OpFigure f;
  f.rows = 10;
  EXPECT_EQ(f.RowsPerSecond(), 0);
  f.seconds = 2;
  EXPECT_EQ(f.RowsPerSecond(), 5);
}

Figure Fig(const char* system, const char* op, size_t row_bytes, const char* fsync, double rows_per_s, double p50) {
  Figure f;
  f.system = system;
  f.op = op;
  f.row_bytes = row_bytes;
  f.batch = 64;
  f.fsync = fsync;
  f.rows_per_s = rows_per_s;
  f.p50_us = p50;
  return f;
}

TEST(ReportTest, RatiosCompareRlQueueWithTheSameOpAndRowSize) {
  Figure q = Fig(kSystemQueue, "put", 1024, "never", 300, 10);
  Figure r = Fig(kSystemRedis, "put", 1024, "off", 200, 20);
  Figure other_size = Fig(kSystemRedis, "put", 65536, "off", 1, 1);
  Figure z = Fig(kSystemZmq, "put", 1024, "none", 600, 0);
  std::vector<Figure> all = {other_size, r, z, q};
  AddRatios(&all);
  const Figure& got = all.back();
  ASSERT_TRUE(got.redis_rows_per_s.has_value());
  EXPECT_DOUBLE_EQ(*got.redis_rows_per_s, 1.5);
  EXPECT_DOUBLE_EQ(*got.redis_p50, 0.5);
  EXPECT_FALSE(got.redis_p99.has_value());  // Redis p99 is 0: no ratio
  EXPECT_DOUBLE_EQ(*got.zmq_rows_per_s, 0.5);
  EXPECT_FALSE(all[1].redis_rows_per_s.has_value());  // baselines get no ratios
}

TEST(ReportTest, EachPolicyIsComparedWithRedissClosestAndWithNever) {
  std::vector<Figure> all = {
      Fig(kSystemRedis, "e2e", 1024, "off", 400, 10),      Fig(kSystemRedis, "e2e", 1024, "everysec", 200, 10),
      Fig(kSystemRedis, "e2e", 1024, "always", 50, 10),    Fig(kSystemQueue, "e2e", 1024, "never", 300, 10),
      Fig(kSystemQueue, "e2e", 1024, "batch", 240, 10),    Fig(kSystemQueue, "e2e", 1024, "always", 150, 10),
  };
  AddRatios(&all);
  EXPECT_DOUBLE_EQ(*all[3].redis_rows_per_s, 300.0 / 400);  // never vs persistence off
  EXPECT_DOUBLE_EQ(*all[4].redis_rows_per_s, 240.0 / 200);  // batch vs appendfsync everysec
  EXPECT_DOUBLE_EQ(*all[5].redis_rows_per_s, 150.0 / 50);   // always vs appendfsync always
  EXPECT_DOUBLE_EQ(*all[3].never_rows_per_s, 1.0);
  EXPECT_DOUBLE_EQ(*all[4].never_rows_per_s, 0.8);
  EXPECT_DOUBLE_EQ(*all[5].never_rows_per_s, 0.5);
  EXPECT_FALSE(all[0].never_rows_per_s.has_value());
}

TEST(ReportTest, JsonLineHasEveryField) {
  Figure f = Fig(kSystemQueue, "e2e", 1024, "never", 100, 10);
  f.consumers = 3;
  f.exactly_once = true;
  auto j = nlohmann::json::parse(FigureJson(f));
  for (const char* key : {"system", "op", "row_bytes", "batch", "fsync", "producers", "consumers", "rows", "rows_per_s",
                          "p50_us", "p99_us", "exactly_once", "rows_per_s_vs_redis", "p50_vs_redis", "p99_vs_redis",
                          "rows_per_s_vs_zmq", "rows_per_s_vs_never"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["consumers"], 3);
  EXPECT_TRUE(j["rows_per_s_vs_redis"].is_null());
}

}  // namespace
}  // namespace rl::profile
