// The plan simulator against step times worked out by hand (fixed costs, fixed lengths).
#include "rl/profile/plan_sim.h"

#include <gtest/gtest.h>

namespace rl::profile {
namespace {

// One step's batch is one rollout batch of 8 rows (4 groups of 2), every response 5 tokens:
// generating it takes `gen` seconds, scoring it `reward`, training it `train`.
PlanCosts Fixed(double gen, double reward, double train, double sync) {
  PlanCosts c;
  c.lengths = {5, 5, 5, 5, 5};
  c.gen_token_s = gen / 40;  // 8 rows x 5 tokens
  c.reward_row_s = reward / 8;
  c.train_step_s = train;
  c.sync_s = sync;
  return c;
}

PlanShape Small() {
  PlanShape s;
  s.prompts_per_step = 4;
  s.group_size = 2;
  s.rollout_rows = 8;
  s.reward_rows = 8;
  s.micro_batch = 8;
  return s;
}

PlanConfig Mode(int64_t k, double f, int rollouts = 1) {
  PlanConfig c;
  c.staleness = k;
  c.start_fraction = f;
  c.rollouts = rollouts;
  return c;
}

double StepSeconds(const PlanCosts& c, const PlanShape& s, const PlanConfig& cfg, int cores = 8) {
  auto r = Simulate(c, s, cfg, 20, 4, cores, 1);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? r->step_s : -1;
}

TEST(PlanSimTest, SyncStepIsTheSumOfItsParts) {
  // gen + reward + train + weight sync, one after the other.
  EXPECT_NEAR(StepSeconds(Fixed(1.0, 0.25, 0.5, 0.25), Small(), Mode(0, 1)), 2.0, 1e-9);
}

TEST(PlanSimTest, SyncStepCountsTheSerialWorkAndTheCheckpointWrite) {
  PlanCosts c = Fixed(1.0, 0.25, 0.5, 0.25);
  c.post_s = 0.1;   // evaluation and snapshot: before the version is published
  c.write_s = 0.3;  // the next on-policy step waits for it while the weights travel (0.25)
  EXPECT_NEAR(StepSeconds(c, Small(), Mode(0, 1)), 1.0 + 0.25 + 0.5 + 0.1 + 0.3, 1e-9);
}

TEST(PlanSimTest, EachHandoffThroughTheQueueAddsItsLatency) {
  PlanCosts c = Fixed(1.0, 0.25, 0.5, 0.25);
  c.hop_s = 0.01;  // generated, scored; the prompts' hand-over hides behind the weight sync
  EXPECT_NEAR(StepSeconds(c, Small(), Mode(0, 1)), 2.02, 1e-9);
  c.sync_s = 0;
  EXPECT_NEAR(StepSeconds(c, Small(), Mode(0, 1)), 1.75 + 0.03, 1e-9);
}

TEST(PlanSimTest, AsyncTrainerBoundFeedsOnlyBetweenGets) {
  // As rl-train's loop does, the feeder runs only between the trainer's gets, and a step's batch
  // counts as in flight until its checkpoint is written. With a whole batch per get, a step that
  // finds its batch ready (train, 1.0 s) feeds nothing while it trains, so the step after it waits
  // for a batch generated from its start (gen + reward + train = 1.6 s): 1.3 s a step on average,
  // not the max(gen + reward, train) = 1.0 s of an ideal pipeline.
  auto r = Simulate(Fixed(0.5, 0.1, 1.0, 0.0), Small(), Mode(1, 0), 20, 4, 8, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->step_s, 1.3, 1e-9);
  EXPECT_NEAR(r->step_ends[5] - r->step_ends[4], 1.0, 1e-9);
  EXPECT_NEAR(r->step_ends[6] - r->step_ends[5], 1.6, 1e-9);
}

TEST(PlanSimTest, AsyncTrainerBoundWithPiecesFeedsBetweenThem) {
  // Two micro-batches a step (0.5 s each), half-batch rollouts (gen 0.25 s, reward 0.05 s). The
  // step's first feed comes before the last checkpoint's ack, so the next batch's second half is
  // fed only after the first piece: a step that finds its batch ready takes 1.0 s, the next one
  // 0.5 + 0.25 + 0.05 + 0.5 = 1.3 s.
  PlanCosts c = Fixed(0.5, 0.1, 0.0, 0.0);
  c.train_token_s = 1.0 / 40;  // 1.0 s a batch (8 rows x 5 tokens), in two pieces
  c.train_tokens_per_row = 5;
  PlanShape s = Small();
  s.rollout_rows = 4;
  s.micro_batch = 4;
  auto r = Simulate(c, s, Mode(1, 0), 20, 4, 8, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->step_ends[5] - r->step_ends[4], 1.0, 1e-9);
  EXPECT_NEAR(r->step_ends[6] - r->step_ends[5], 1.3, 1e-9);
  EXPECT_NEAR(r->step_s, 1.15, 1e-9);
}

TEST(PlanSimTest, AsyncGenerationBoundStepIsGenerationAlone) {
  // Rewards of one batch are scored on their own slot while the next one generates, so the
  // generation slot alone sets the pace: max(gen, reward, train) = gen.
  auto r = Simulate(Fixed(1.0, 0.2, 0.3, 0.0), Small(), Mode(1, 0), 20, 4, 8, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_NEAR(r->step_s, 1.0, 1e-9);
  EXPECT_NEAR(r->trainer_idle, 0.7, 1e-9);
  EXPECT_NEAR(r->rollout_busy, 1.0, 1e-9);
}

TEST(PlanSimTest, TwoRolloutSlotsHalveGenerationWhenCoresAllow) {
  PlanShape s = Small();
  s.rollout_rows = 4;  // each slot takes half the batch
  const PlanCosts c = Fixed(1.0, 0.25, 0.5, 0.25);  // 0.5 s for a half batch
  EXPECT_NEAR(StepSeconds(c, s, Mode(0, 1, 2), 8), 0.5 + 0.25 + 0.5 + 0.25, 1e-9);
  // On one core the two halves share it: no faster than one slot doing both.
  EXPECT_NEAR(StepSeconds(c, s, Mode(0, 1, 2), 1), 2.0, 1e-9);
}

TEST(PlanSimTest, TrainerRanksSplitTheTokenWork) {
  PlanCosts c = Fixed(1.0, 0.25, 0.0, 0.25);
  c.train_token_s = 0.01;
  c.train_tokens_per_row = 10;  // 8 rows: 0.8 s on one rank
  c.allreduce_s = 0.05;
  PlanConfig two = Mode(0, 1);
  two.ranks = 2;
  EXPECT_NEAR(StepSeconds(c, Small(), Mode(0, 1)), 1.0 + 0.25 + 0.8 + 0.25, 1e-9);
  EXPECT_NEAR(StepSeconds(c, Small(), two), 1.0 + 0.25 + 0.4 + 0.05 + 0.25, 1e-9);
}

TEST(PlanSimTest, DynamicSamplingGeneratesMoreGroupsPerStep) {
  PlanShape s = Small();
  s.keep = 0.5;
  s.rollout_rows = 2;  // one group per batch: gen 0.25 s each
  auto r = Simulate(Fixed(1.0, 0.0, 0.0, 0.0), s, Mode(0, 1), 400, 50, 8, 7);
  ASSERT_TRUE(r.ok());
  // About 8 groups generated per 4 kept; the feeder refills after each take.
  EXPECT_NEAR(r->step_s, 2.0, 0.2);
}

TEST(PlanSimTest, SameSeedSameResult) {
  PlanCosts c = Fixed(1.0, 0.25, 0.5, 0.25);
  c.lengths = {1, 3, 5, 7, 12};
  auto a = Simulate(c, Small(), Mode(1, 0.5), 30, 5, 2, 42);
  auto b = Simulate(c, Small(), Mode(1, 0.5), 30, 5, 2, 42);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->step_ends, b->step_ends);
}

TEST(PlanSimTest, DecodeTableCostsEveryRoundAtItsActiveSequences) {
  PlanCosts c = Fixed(0, 0, 0, 0);
  c.lengths = {2, 2, 2, 2, 2};
  c.prompt_tokens = 3;
  // Round time = 0.01 * active at any context: 8 rows x 2 rounds = 0.16 s.
  c.decode.by_batch = {{1, {{0, 0.01}, {100, 0.01}}}, {16, {{0, 0.16}, {100, 0.16}}}};
  EXPECT_NEAR(c.decode.Round(8, 40), 0.08, 1e-12);
  EXPECT_NEAR(StepSeconds(c, Small(), Mode(0, 1)), 0.16, 1e-9);
}

TEST(PlanSimTest, RefusesConfigurationsThatCannotRun) {
  PlanConfig none = Mode(0, 1, 0);
  EXPECT_EQ(Simulate(PlanCosts{}, Small(), none, 10, 1, 1, 1).status().code(), Code::kDataError);
  EXPECT_EQ(Simulate(PlanCosts{}, Small(), Mode(0, 1.5), 10, 1, 1, 1).status().code(), Code::kDataError);
  EXPECT_EQ(Simulate(PlanCosts{}, Small(), Mode(0, 1), 10, 10, 1, 1).status().code(), Code::kDataError);
}

}  // namespace
}  // namespace rl::profile
