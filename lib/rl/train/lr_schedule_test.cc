#include "rl/train/lr_schedule.h"

#include <gtest/gtest.h>

namespace rl::train {
namespace {

// lr 1, warm-up 2, horizon 10, floor 0.1: the values worked out by hand from the definitions.
LrSchedule Schedule(LrDecay decay) { return {1.0, 2, decay, 10, 0.1}; }

TEST(LrScheduleTest, WarmUpRampsFromOneStepAboveZero) {
  for (LrDecay d : {LrDecay::kConstant, LrDecay::kLinear, LrDecay::kCosine}) {
    EXPECT_DOUBLE_EQ(LearningRate(Schedule(d), 0), 0.5);
    EXPECT_DOUBLE_EQ(LearningRate(Schedule(d), 1), 1.0);
    EXPECT_DOUBLE_EQ(LearningRate(Schedule(d), 2), 1.0);  // the first step after the warm-up
  }
}

TEST(LrScheduleTest, ConstantStaysPut) {
  for (int64_t s = 2; s < 30; ++s) EXPECT_DOUBLE_EQ(LearningRate(Schedule(LrDecay::kConstant), s), 1.0);
}

TEST(LrScheduleTest, LinearFallsToTheFloorAtTheHorizon) {
  LrSchedule s = Schedule(LrDecay::kLinear);
  EXPECT_DOUBLE_EQ(LearningRate(s, 6), 0.55);        // p = 4/8: 0.1 + 0.9 * 0.5
  EXPECT_DOUBLE_EQ(LearningRate(s, 9), 0.2125);      // p = 7/8: 0.1 + 0.9 / 8, the last step
  EXPECT_DOUBLE_EQ(LearningRate(s, 10), 0.1);        // past the horizon: the floor
  EXPECT_DOUBLE_EQ(LearningRate(s, 1000), 0.1);
}

TEST(LrScheduleTest, CosineFallsToTheFloorAtTheHorizon) {
  LrSchedule s = Schedule(LrDecay::kCosine);
  EXPECT_NEAR(LearningRate(s, 4), 0.1 + 0.45 * (1 + 0.70710678118654752), 1e-12);  // p = 1/4
  EXPECT_NEAR(LearningRate(s, 6), 0.55, 1e-12);                                    // p = 1/2
  EXPECT_NEAR(LearningRate(s, 9), 0.1 + 0.45 * (1 - 0.92387953251128674), 1e-12);  // p = 7/8
  EXPECT_NEAR(LearningRate(s, 10), 0.1, 1e-12);
  EXPECT_NEAR(LearningRate(s, 50), 0.1, 1e-12);
}

TEST(LrScheduleTest, DecayIsMonotoneAndNeverBelowTheFloor) {
  for (LrDecay d : {LrDecay::kLinear, LrDecay::kCosine}) {
    LrSchedule s{3e-4, 5, d, 400, 0};
    double last = LearningRate(s, 5);
    for (int64_t t = 6; t < 420; ++t) {
      double lr = LearningRate(s, t);
      EXPECT_LE(lr, last) << t;
      EXPECT_GE(lr, 0) << t;
      last = lr;
    }
    EXPECT_GT(LearningRate(s, 399), 0);  // the last step still moves the weights
  }
}

TEST(LrScheduleTest, ParseAndValidate) {
  EXPECT_EQ(ParseLrDecay("cosine").value(), LrDecay::kCosine);
  EXPECT_EQ(ParseLrDecay("linear").value(), LrDecay::kLinear);
  EXPECT_EQ(ParseLrDecay("constant").value(), LrDecay::kConstant);
  EXPECT_FALSE(ParseLrDecay("step").ok());
  EXPECT_TRUE(ValidateLrSchedule({1e-3, 0, LrDecay::kConstant, 0, 0}).ok());  // runs until stopped
  Status no_horizon = ValidateLrSchedule({1e-3, 0, LrDecay::kCosine, 0, 0});
  EXPECT_EQ(no_horizon.code(), Code::kInvalidArgument);
  EXPECT_NE(no_horizon.message().find("--max-steps"), std::string::npos) << no_horizon.message();
  EXPECT_FALSE(ValidateLrSchedule({1e-3, 10, LrDecay::kLinear, 10, 0}).ok());
  EXPECT_FALSE(ValidateLrSchedule({1e-3, 0, LrDecay::kLinear, 10, 1.5}).ok());
  EXPECT_FALSE(ValidateLrSchedule({1e-3, 0, LrDecay::kLinear, 10, -0.1}).ok());
}

}  // namespace
}  // namespace rl::train
