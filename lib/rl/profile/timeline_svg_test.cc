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

}  // namespace
}  // namespace rl::profile
