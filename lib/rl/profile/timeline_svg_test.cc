#include "rl/profile/timeline_svg.h"

#include <gtest/gtest.h>

namespace rl::profile {
namespace {

TEST(TimelineSvgTest, ALanePerRoleOneBarPerPhaseRunAndARedLinePerFault) {
  auto run = ParseRunEvents({
      {"train-0", R"({"ts":100,"event":"start","step":0,"phase":"waiting-for-data"}
{"ts":101,"event":"phase","step":0,"phase":"train"}
{"ts":102,"event":"step","step":1,"phase":"train"}
{"ts":103,"event":"step","step":2,"phase":"train"}
{"ts":106,"event":"start","step":1,"phase":"train"}
{"ts":107,"event":"step","step":2,"phase":"train"}
)"},
      {"rollout-0", R"({"ts":100,"event":"batch","phase":"generate"}
{"ts":101,"event":"batch","phase":"generate"}
{"ts":102,"event":"batch","phase":"generate"}
{"ts":107,"event":"stop","phase":"stopped"}
)"},
      {"watchdog-0", R"({"ts":104.5,"event":"failure","member":"train/0","kind":"train","fault_ts":104.0,"reason":"killed"}
{"ts":104.5,"event":"decision","member":"train/0","action":"restart-role"}
)"}});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto report = ComputeEttr(*run);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::string svg = TimelineSvg(*run, *report);
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find(">train-0</text>"), std::string::npos);
  EXPECT_NE(svg.find(">rollout-0</text>"), std::string::npos);
  EXPECT_EQ(svg.find(">watchdog-0</text>"), std::string::npos) << "the watchdog has no lane";
  auto count = [&](const std::string& s) {
    size_t n = 0;
    for (size_t at = svg.find(s); at != std::string::npos; at = svg.find(s, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("<title>rollout-0: generate</title>"), 1u) << "three generate lines make one bar";
  EXPECT_EQ(count("<title>train-0: train</title>"), 2u) << "the fault cuts the train bar in two";
  EXPECT_EQ(count("<title>train/0: killed (restart-role)</title>"), 1u);
  EXPECT_EQ(count("stroke=\"#c62828\""), 2u) << "the fault's line and the legend's";
}

TEST(TimelineSvgTest, ALayoutSwitchIsATickOnItsRolloutsLaneWhereItBegan) {
  auto run = ParseRunEvents({
      {"train-0", R"({"ts":100,"event":"start","step":0,"phase":"train"}
{"ts":110,"event":"step","step":1,"phase":"train"}
)"},
      // A batch from 100 to 110 with two switches, logged at its end; the third line is from a log
      // written before switches had a time, and is not drawn.
      {"rollout-g", R"({"ts":100,"event":"batch","phase":"generate"}
{"ts":110,"event":"layout","phase":"generate","from":1,"to":2,"round":12,"at":104,"sequences":3,"recompute":false,"seconds":0.5,"predicted_s":0.25}
{"ts":110,"event":"layout","phase":"generate","from":2,"to":1,"round":20,"at":108,"sequences":7,"recompute":true,"seconds":1,"predicted_s":0}
{"ts":110,"event":"layout","phase":"generate","from":1,"to":2,"round":30,"sequences":1,"seconds":0.1}
{"ts":110,"event":"batch","phase":"generate","layout_switches":3}
)"}});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  auto report = ComputeEttr(*run);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  std::string svg = TimelineSvg(*run, *report);
  EXPECT_NE(svg.find("<title>rollout-g: tp 1 to 2 after round 12, 3 sequences moved, 0.500 s (predicted 0.250 s)</title>"),
            std::string::npos)
      << svg;
  EXPECT_NE(svg.find("<title>rollout-g: tp 2 to 1 after round 20, 7 sequences recomputed, 1.000 s (predicted 0.000 s)</title>"),
            std::string::npos);
  EXPECT_EQ(svg.find("after round 30"), std::string::npos) << "no time, no tick";
  // The picture spans 100..110 over x 110..1180: a switch at 104 is at x 538.0, not at its line's ts.
  EXPECT_NE(svg.find("<line x1=\"538.0\" y1=\"28.0\" x2=\"538.0\" y2=\"48.0\" stroke=\"#d81b60\""), std::string::npos) << svg;
  EXPECT_NE(svg.find(">layout switch (tp)</text>"), std::string::npos);
}

// A rollout measured alone has no trainer to time the run by: its lanes and layout switches are
// drawn all the same, under a title that says so.
TEST(TimelineSvgTest, ARunWithoutATrainerIsDrawnWithoutETTR) {
  auto run = ParseRunEvents({{"rollout-g", R"({"ts":100,"event":"batch","phase":"generate"}
{"ts":102,"event":"layout","phase":"generate","from":1,"to":2,"round":4,"at":101,"sequences":2,"seconds":0.2,"predicted_s":0.1}
{"ts":102,"event":"batch","phase":"generate","layout_switches":1}
)"}});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(ComputeEttr(*run).status().code(), Code::kNotFound);
  const EttrReport untimed = UntimedReport(*run);
  EXPECT_TRUE(untimed.trainer.empty());
  EXPECT_DOUBLE_EQ(untimed.run_s, 2);
  std::string svg = TimelineSvg(*run, untimed);
  EXPECT_NE(svg.find(">1 role instance over 2.0 s, no trainer (no ETTR)</text>"), std::string::npos) << svg;
  EXPECT_NE(svg.find("<title>rollout-g: tp 1 to 2 after round 4, 2 sequences moved"), std::string::npos) << svg;
}

// Times at both ends of the double range: their span overflows to inf, and the time axis's ticks
// once stepped towards it for ever. Times that are not finite are no event lines at all.
TEST(TimelineSvgTest, TimesAtTheEndsOfTheDoubleRangeAreDrawnInBoundedTime) {
  auto run = ParseRunEvents({{"rollout-0", "{\"ts\":-1e308,\"event\":\"batch\"}\n{\"ts\":1e308,\"event\":\"batch\"}\n"}});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string svg = TimelineSvg(*run, UntimedReport(*run));
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_LT(svg.size(), 100000u);
  EXPECT_FALSE(ParseRunEvents({{"x", "{\"ts\":1e999,\"event\":\"batch\"}\n{\"ts\":1,\"event\":\"a\"}\n"}}).ok());
}

}  // namespace
}  // namespace rl::profile
