#include "rl/health/placement.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>

namespace rl::health {
namespace {

// Runs a search the way the supervisor walks it: from `start`, one slot per move to each split
// the search asks for. Returns the split found; *moves counts the slots moved.
int Walk(int pool, int start, const std::function<double(int)>& f, int* moves, int* measured) {
  SplitSearch search(1, pool - 1);
  int x = start;
  *moves = 0;
  *measured = 0;
  while (auto next = search.Next(x)) {
    *moves += std::abs(*next - x);
    x = *next;
    search.Record(x, f(x));
    ++*measured;
  }
  EXPECT_TRUE(search.done());
  *moves += std::abs(search.best() - x);
  return search.best();
}

TEST(SplitSearchTest, FindsTheMinimumOfEveryUnimodalShapeFromEveryStart) {
  for (int pool = 2; pool <= 24; ++pool) {
    for (int best = 1; best <= pool - 1; ++best) {
      for (int start = 1; start <= pool - 1; ++start) {
        // V shapes with unequal slopes: one side starved, the other merely wasted.
        auto f = [best](int x) { return x < best ? 10.0 + 3.0 * (best - x) : 10.0 + 0.5 * (x - best); };
        int moves = 0, measured = 0;
        EXPECT_EQ(Walk(pool, start, f, &moves, &measured), best) << "pool " << pool << " start " << start;
        // Ternary search: two probes per round keep two thirds, so about 2 log_1.5 P measurements.
        EXPECT_LE(measured, 2 * static_cast<int>(std::ceil(std::log(pool) / std::log(1.5))) + 3);
      }
    }
  }
}

TEST(SplitSearchTest, MeasuresFewerSplitsThanASweep) {
  int moves = 0, measured = 0;
  auto f = [](int x) { return std::abs(x - 17) + 1.0; };
  EXPECT_EQ(Walk(40, 1, f, &moves, &measured), 17);
  EXPECT_LT(measured, 39 / 2);
}

TEST(SplitSearchTest, ASweepMeasuresEverySplitOnceWalkingToTheNearest) {
  SplitSearch s(1, 9, /*sweep=*/true);
  int x = 5, moves = 0, measured = 0;
  while (auto n = s.Next(x)) {
    moves += std::abs(*n - x);
    x = *n;
    s.Record(x, std::abs(x - 7) + 1.0);
    ++measured;
  }
  EXPECT_EQ(measured, 9);
  EXPECT_EQ(s.best(), 7);
  EXPECT_LE(moves, 12);  // 5 -> 4 ... 1 (nearest first), then 6 ... 9
}

TEST(SplitSearchTest, APlateauKeepsItsMinimum) {
  // Flat between 4 and 8: any of those is a right answer; the search must not leave the plateau.
  auto f = [](int x) { return x < 4 ? 20.0 - x : (x > 8 ? 10.0 + x : 16.0); };
  int moves = 0, measured = 0;
  int x = Walk(12, 11, f, &moves, &measured);
  EXPECT_GE(x, 4);
  EXPECT_LE(x, 8);
}

TEST(SplitSearchTest, APoolOfTwoHasOneSplit) {
  SplitSearch s(1, 1);
  ASSERT_EQ(s.Next(1), 1);
  s.Record(1, 3.0);
  EXPECT_TRUE(s.done());
  EXPECT_EQ(s.best(), 1);
  EXPECT_FALSE(s.Next(1).has_value());
}

TEST(SplitSearchTest, TheBestMeasuredWinsOverANoisyLastRound) {
  SplitSearch s(1, 7);
  // Round 1 probes 3 and 5; a lucky reading at 3 sends the search left, where all is worse.
  std::map<int, double> t = {{1, 9}, {2, 8}, {3, 5}, {4, 7}, {5, 6}, {6, 7}, {7, 8}};
  int x = 4;
  while (auto n = s.Next(x)) {
    x = *n;
    s.Record(x, t[x]);
  }
  EXPECT_EQ(s.best(), 3);
  EXPECT_DOUBLE_EQ(s.best_seconds(), 5);
}

TEST(StepClockTest, ReadsStepEventsAsTheyAreAppendedAndWaitsForWholeLines) {
  std::string path = ::testing::TempDir() + "/placement-steps.jsonl";
  std::remove(path.c_str());
  StepClock clock(path);
  EXPECT_TRUE(clock.Poll().empty());  // no file yet
  std::ofstream out(path);
  out << R"({"ts":1,"event":"phase","step":0})" << "\n"
      << R"({"ts":2,"event":"step","step":1,"seconds":0.5})" << "\n"
      << R"({"ts":3,"event":"step","step":2,"seconds":0.75})" << "\n"
      << R"({"ts":4,"event":"step","step":3,"sec)";
  out.flush();
  EXPECT_EQ(clock.Poll(), (std::vector<double>{0.5, 0.75}));
  out << R"(onds":1.25})" << "\n" << "not json\n" << R"({"event":"step","seconds":"x"})" << "\n";
  out.flush();
  EXPECT_EQ(clock.Poll(), (std::vector<double>{1.25}));
  EXPECT_TRUE(clock.Poll().empty());
  out.close();
  std::ofstream again(path, std::ios::trunc);  // a new run's log in its place starts over
  again << R"({"event":"step","seconds":2})" << "\n";
  again.close();
  EXPECT_EQ(clock.Poll(), (std::vector<double>{2}));
}

}  // namespace
}  // namespace rl::health
