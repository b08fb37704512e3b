// The adaptive engine against plain generation: whatever the configuration, however the state
// moves at a switch, and with prompts added as it runs (refill), greedy decoding gives the tokens
// of the whole model decoding alone.
#include "rl/dist/adaptive_generate.h"
#include "rl/dist/adaptive_rule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include <ATen/ATen.h>

#include "rl/dist/group_generate.h"
#include "rl/dist/test_ranks.h"
#include "rl/model/test_util.h"

namespace rl::dist {
namespace {

using model::Architecture;
using model::Generation;
using model::ModelConfig;
using model::Transformer;
using testing::RunRanks;

struct Workload {
  std::vector<std::vector<int64_t>> prompts;
  std::vector<int64_t> caps;
};

// Mostly short responses and a few long ones, as in reasoning workloads.
Workload LongTail(const ModelConfig& c, int n) {
  Workload w;
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> p;
    for (int j = 0; j <= i % 5; ++j) p.push_back((i * 5 + j * 3 + 1) % c.vocab_size);
    w.prompts.push_back(p);
    w.caps.push_back(i % 7 == 3 ? 40 : 3 + i % 4);
  }
  return w;
}

struct Fixture {
  ModelConfig config;
  std::optional<Transformer> whole;
  Workload work;
  model::GenerateOptions gen;
  std::vector<Generation> expected;
};

Fixture MakeFixture(Architecture arch, bool record_routes = false) {
  Fixture f;
  f.config = model::testing::TinyConfig(arch, true, 2);
  f.config.max_position_embeddings = 64;
  auto whole = Transformer::Create(f.config, 3);
  EXPECT_TRUE(whole.ok());
  f.whole.emplace(*whole);
  model::testing::RandomizeWeights(&*f.whole, 5, 0.5);
  f.work = LongTail(f.config, 14);
  f.gen.sampling.temperature = 0;
  f.gen.slots = 3;
  f.gen.max_new_tokens_each = f.work.caps;
  f.gen.record_routes = record_routes;
  auto expected = model::Generate(*f.whole, f.work.prompts, f.gen);
  EXPECT_TRUE(expected.ok());
  f.expected = *expected;
  return f;
}

std::vector<AdaptiveResult> RunStage(const Fixture& f, const AdaptiveOptions& o) {
  std::vector<AdaptiveResult> results(2);
  RunRanks(2, [&](Group& g) {
    auto r = AdaptiveGenerate(g, *f.whole, f.work.prompts, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    results[static_cast<size_t>(g.rank())] = std::move(*r);
  });
  return results;
}

// A rollout group of two: rank 1 follows with `follower_opts` and a model of f's shape under other
// weights (the leader's come with its first request), rank 0 runs `lead` on the group. Returns
// the follower's status.
Status LeadWithAFollower(const Fixture& f, const GroupGenerateOptions& follower_opts,
                         const std::function<void(Group&)>& lead) {
  Status follower = Status::Internal("not run");
  RunRanks(2, [&](Group& g) {
    if (g.rank() == 0) {
      lead(g);
      return;
    }
    auto seed_model = Transformer::Create(f.config, 99);
    ASSERT_TRUE(seed_model.ok());
    follower = RunGroupFollower(g, *seed_model, follower_opts);
  });
  return follower;
}

void ExpectSameTokens(const Fixture& f, const std::vector<AdaptiveResult>& results, const char* what) {
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].generations.size(), f.expected.size()) << what;
    for (size_t i = 0; i < f.expected.size(); ++i) {
      EXPECT_EQ(results[r].generations[i].response_ids, f.expected[i].response_ids)
          << what << ": rank " << r << " prompt " << i;
      EXPECT_EQ(results[r].generations[i].stop, f.expected[i].stop) << what;
      ASSERT_EQ(results[r].generations[i].logprobs.size(), f.expected[i].logprobs.size());
    }
  }
}

TEST(AdaptiveGenerateTest, EveryConfigurationAndSwitchGivesTheSameGreedyTokens) {
  for (Architecture arch : {Architecture::kLlama, Architecture::kQwen3}) {
    const Fixture f = MakeFixture(arch);
    AdaptiveOptions o;
    o.generate = f.gen;
    o.check_every = 2;
    o.adaptive = false;
    ExpectSameTokens(f, RunStage(f, o), "static tp 1");
    o.start_tp = 2;
    ExpectSameTokens(f, RunStage(f, o), "static tp 2");
    o.start_tp = 1;
    o.adaptive = true;
    o.force_switch_check = 0;  // at the first check with nothing pending
    for (auto move : {AdaptiveOptions::Move::kMigrate, AdaptiveOptions::Move::kRecompute}) {
      o.move = move;
      const auto results = RunStage(f, o);
      const char* what = move == AdaptiveOptions::Move::kMigrate ? "migrated" : "recomputed";
      ExpectSameTokens(f, results, what);
      ASSERT_EQ(results[0].switches.size(), 1u) << what;
      EXPECT_GT(results[0].switches[0].sequences, 0) << what;
      EXPECT_EQ(results[0].switches[0].recompute, move == AdaptiveOptions::Move::kRecompute);
      // The rounds after the switch ran at degree 2.
      EXPECT_EQ(results[1].trace.back().tp, 2);
    }
  }
}

// Routing replay's routes (GenerateOptions::record_routes) from a mixture of experts: every
// configuration, both ways of moving state at a switch and the rollout group's leader give each
// response the routes plain generation records, [P + R - 1, S, k] (the router is replicated, so
// every rank routes alike and the replica's first rank speaks for it).
TEST(AdaptiveGenerateTest, RoutesAreRecordedAsPlainGenerationRecordsThem) {
  const Fixture f = MakeFixture(Architecture::kQwen3Moe, /*record_routes=*/true);
  const int64_t per_token = f.config.SparseLayerCount() * f.config.moe.num_experts_per_tok;
  ASSERT_GT(per_token, 0);
  for (size_t i = 0; i < f.expected.size(); ++i) {
    const size_t fed = f.work.prompts[i].size() + f.expected[i].response_ids.size() - 1;
    ASSERT_EQ(f.expected[i].routes.size(), fed * static_cast<size_t>(per_token)) << "prompt " << i;
  }
  auto expect_routes = [&](const std::vector<Generation>& got, const std::string& what) {
    ASSERT_EQ(got.size(), f.expected.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].response_ids, f.expected[i].response_ids) << what << ": prompt " << i;
      EXPECT_EQ(got[i].routes, f.expected[i].routes) << what << ": prompt " << i;
    }
  };
  AdaptiveOptions o;
  o.generate = f.gen;
  o.check_every = 2;
  o.adaptive = false;
  for (int tp : {1, 2}) {
    o.start_tp = tp;
    const auto results = RunStage(f, o);
    for (size_t r = 0; r < results.size(); ++r) {
      expect_routes(results[r].generations, "static tp " + std::to_string(tp) + ", rank " + std::to_string(r));
    }
  }
  o.start_tp = 1;
  o.adaptive = true;
  o.force_switch_check = 0;
  for (auto move : {AdaptiveOptions::Move::kMigrate, AdaptiveOptions::Move::kRecompute}) {
    o.move = move;
    const auto results = RunStage(f, o);
    ASSERT_EQ(results[0].switches.size(), 1u);
    expect_routes(results[0].generations, move == AdaptiveOptions::Move::kMigrate ? "migrated" : "recomputed");
  }
  const Status follower = LeadWithAFollower(f, {}, [&](Group& g) {
    GroupLeader leader(&g, {});
    model::GenerateOptions go = f.gen;
    go.slots = 6;
    auto got = leader.Generate(*f.whole, 1, f.work.prompts, go, nullptr);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    expect_routes(*got, "the group's leader");
    go.record_routes = false;  // the header says so: the followers record nothing either
    got = leader.Generate(*f.whole, 1, f.work.prompts, go, nullptr);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const Generation& gen : *got) EXPECT_TRUE(gen.routes.empty());
    EXPECT_TRUE(leader.Stop().ok());
  });
  EXPECT_TRUE(follower.ok()) << follower.ToString();
}

// A profile in which degree 2 is `speedup` times faster per step than degree 1 at any batch.
LatencyModel Profile(double speedup, double reshard_s) {
  std::vector<DecodePoint> d;
  for (int tp : {1, 2}) {
    for (int64_t b : {1, 4}) {
      for (int64_t t : {0, 400}) {
        d.push_back({tp, b, t, (0.01 + 0.002 * static_cast<double>(b) + 1e-5 * static_cast<double>(t)) /
                                   (tp == 2 ? speedup : 1.0)});
      }
    }
  }
  std::vector<PrefillPoint> p{{1, 1, 0.001}, {1, 64, 0.01}, {2, 1, 0.001}, {2, 64, 0.006}};
  auto m = LatencyModel::Create(d, p, {1e9, reshard_s, 1024});
  EXPECT_TRUE(m.ok());
  return *m;
}

TEST(AdaptiveGenerateTest, ThePredictorDecidesWhetherToSwitch) {
  const Fixture f = MakeFixture(Architecture::kQwen2);
  AdaptiveOptions o;
  o.generate = f.gen;
  o.check_every = 2;
  const LatencyModel fast = Profile(1.8, 0.001), slow = Profile(0.5, 0.001), costly = Profile(1.8, 100);
  o.predictor = &fast;
  auto results = RunStage(f, o);
  ExpectSameTokens(f, results, "fast tp 2");
  ASSERT_EQ(results[0].switches.size(), 1u);
  EXPECT_LT(results[0].switches[0].predicted.total_s(), results[0].switches[0].predicted.stay_s);
  o.predictor = &slow;
  results = RunStage(f, o);
  ExpectSameTokens(f, results, "slow tp 2");
  EXPECT_TRUE(results[0].switches.empty());
  o.predictor = &costly;  // faster, but the switch costs more than it saves
  results = RunStage(f, o);
  EXPECT_TRUE(results[0].switches.empty());
}

// The decisions use the profile as the calibration scales it: a machine measured far slower than
// the "costly" profile says makes the remaining decode time outweigh its 100 s reshard. Every pure
// decode round of the trace carries its prediction; prefill rounds none.
TEST(AdaptiveGenerateTest, DecisionsAndPredictionsFollowTheCalibration) {
  const Fixture f = MakeFixture(Architecture::kQwen2);
  const LatencyModel costly = Profile(1.8, 100);
  AdaptiveOptions o;
  o.generate = f.gen;
  o.check_every = 2;
  o.predictor = &costly;
  LatencyCalibration slow_machine;
  slow_machine.Observe(1e-3, 1000);  // measured a million times slower than profiled
  std::vector<AdaptiveResult> results(2);
  RunRanks(2, [&](Group& g) {
    LatencyCalibration mine = slow_machine;  // each rank its own, as each process has
    AdaptiveOptions ro = o;
    ro.calibration = &mine;
    auto r = AdaptiveGenerate(g, *f.whole, f.work.prompts, ro);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_LT(mine.scale(), 1e6) << "the stage's own rounds were observed";
    results[static_cast<size_t>(g.rank())] = std::move(*r);
  });
  ExpectSameTokens(f, results, "calibrated costly tp 2");
  ASSERT_EQ(results[0].switches.size(), 1u);
  int decode_rounds = 0;
  for (const RoundTrace& r : results[0].trace) {
    if (r.prefill || r.batch == 0) {
      EXPECT_EQ(r.predicted, 0.0);
    } else {
      ++decode_rounds;
      EXPECT_GT(r.predicted, 0.0);
    }
  }
  EXPECT_GT(decode_rounds, 0);
}

// A rollout group decides with its leader's check interval and margin, whatever its followers
// were started with: ranks that checked at different rounds would call different collectives.
TEST(AdaptiveGenerateTest, ARolloutGroupChecksAndSwitchesByItsLeadersSettings) {
  const Fixture f = MakeFixture(Architecture::kQwen2);
  const LatencyModel fast = Profile(1.8, 0.001);
  GroupGenerateOptions own;
  own.predictor = &fast;
  own.check_every = 5;  // the follower's own would be these
  own.margin = 0;
  const Status follower = LeadWithAFollower(f, own, [&](Group& g) {
    GroupGenerateOptions opts;
    opts.predictor = &fast;
    opts.check_every = 2;
    for (double margin : {100.0, 0.0}) {  // never worth it; then worth it
      opts.margin = margin;
      GroupLeader leader(&g, opts);
      model::GenerateOptions go = f.gen;
      go.slots = 6;  // three per replica, as in the fixture
      auto got = leader.Generate(*f.whole, 1, f.work.prompts, go, nullptr);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (size_t i = 0; i < f.expected.size(); ++i) {
        EXPECT_EQ((*got)[i].response_ids, f.expected[i].response_ids) << "margin " << margin << " prompt " << i;
      }
    }
    EXPECT_TRUE(GroupLeader(&g, opts).Stop().ok());
  });
  EXPECT_TRUE(follower.ok()) << follower.ToString();
}

// Refill: ten prompts, four at the start and two refills of three, against plain generation of
// all ten. The force rule widens at every check without new prompts, so the stage goes
// 1 -> 2 -> 1 (the first refill) -> 2 ... and every move keeps the greedy tokens.
struct RefillRun {
  std::vector<std::vector<int64_t>> start, extra;
  std::vector<Generation> expected;  // of start + extra
};

RefillRun MakeRefill(const Fixture& f) {
  RefillRun r;
  r.start.assign(f.work.prompts.begin(), f.work.prompts.begin() + 4);
  r.extra.assign(f.work.prompts.begin() + 4, f.work.prompts.begin() + 10);
  std::vector<std::vector<int64_t>> all = r.start;
  all.insert(all.end(), r.extra.begin(), r.extra.end());
  model::GenerateOptions g = f.gen;
  g.max_new_tokens_each.clear();
  g.max_new_tokens = 10;
  auto expected = model::Generate(*f.whole, all, g);
  EXPECT_TRUE(expected.ok());
  r.expected = *expected;
  return r;
}

// Rank 0's more_prompts: nothing at its first call (the stage widens), then the extras three at a
// time, then nothing. Its on_finished records what it is told.
struct RefillSource {
  explicit RefillSource(const RefillRun* r) : run(r) {}
  const RefillRun* run;
  int calls = 0;
  size_t given = 0;
  std::vector<std::pair<size_t, Generation>> told;
  model::MorePrompts More() {
    return [this](int64_t free) -> Result<std::vector<std::vector<int64_t>>> {
      EXPECT_GT(free, 0);
      if (calls++ == 0 || given == run->extra.size()) return std::vector<std::vector<int64_t>>();
      std::vector<std::vector<int64_t>> out(run->extra.begin() + static_cast<std::ptrdiff_t>(given),
                                            run->extra.begin() + static_cast<std::ptrdiff_t>(given + 3));
      given += 3;
      return out;
    };
  }
  model::OnFinished Told() {
    return [this](size_t i, const Generation& g) -> Status {
      told.emplace_back(i, g);
      return Status::OK();
    };
  }
};

void ExpectRefilled(const RefillRun& run, const RefillSource& src, const std::vector<AdaptiveResult>& results,
                    const char* what) {
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].generations.size(), run.expected.size()) << what;
    EXPECT_EQ(results[r].refills, 2) << what;
    for (size_t i = 0; i < run.expected.size(); ++i) {
      EXPECT_EQ(results[r].generations[i].response_ids, run.expected[i].response_ids) << what << " prompt " << i;
      EXPECT_EQ(results[r].generations[i].logprobs.size(), run.expected[i].logprobs.size()) << what;
    }
  }
  // Rank 0 was told of every response once, as the one it returns.
  ASSERT_EQ(src.told.size(), run.expected.size()) << what;
  std::vector<bool> seen(run.expected.size(), false);
  for (const auto& [i, g] : src.told) {
    ASSERT_LT(i, seen.size());
    EXPECT_FALSE(seen[i]) << what << " prompt " << i << " told twice";
    seen[i] = true;
    EXPECT_EQ(g.response_ids, run.expected[i].response_ids) << what;
  }
}

std::vector<AdaptiveResult> RunRefill(const Fixture& f, const RefillRun& run, AdaptiveOptions o, RefillSource* src) {
  o.refill = true;
  o.generate.max_new_tokens_each.clear();
  o.generate.max_new_tokens = 10;
  std::vector<AdaptiveResult> results(2);
  RunRanks(2, [&](Group& g) {
    AdaptiveOptions mine = o;
    if (g.rank() == 0) {
      mine.generate.more_prompts = src->More();
      mine.generate.on_finished = src->Told();
    }
    auto r = AdaptiveGenerate(g, *f.whole, run.start, mine);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    results[static_cast<size_t>(g.rank())] = std::move(*r);
  });
  return results;
}

// How many of a stage's switches went from degree `from` to `to`.
int Count(const std::vector<SwitchRecord>& switches, int from, int to) {
  int n = 0;
  for (const SwitchRecord& s : switches) n += s.from == from && s.to == to;
  return n;
}

TEST(AdaptiveGenerateTest, RefillTakesPromptsAtChecksAndSplitsWideReplicasForThem) {
  for (Architecture arch : {Architecture::kLlama, Architecture::kQwen3}) {
    const Fixture f = MakeFixture(arch);
    const RefillRun run = MakeRefill(f);
    AdaptiveOptions o;
    o.generate = f.gen;
    o.check_every = 2;
    o.force_switch_check = 0;
    for (auto move : {AdaptiveOptions::Move::kMigrate, AdaptiveOptions::Move::kRecompute}) {
      o.move = move;
      const char* what = move == AdaptiveOptions::Move::kMigrate ? "migrated" : "recomputed";
      RefillSource src(&run);
      const auto results = RunRefill(f, run, o, &src);
      ExpectRefilled(run, src, results, what);
      for (const SwitchRecord& s : results[0].switches) {
        EXPECT_EQ(s.recompute, move == AdaptiveOptions::Move::kRecompute) << what;
      }
      EXPECT_GE(Count(results[0].switches, 1, 2), 1) << what;
      EXPECT_GE(Count(results[0].switches, 2, 1), 1) << what;
    }
  }
}

// With a predictor, narrowing for new prompts is predicted too. Where one replica over both ranks
// is faster even with every slot full, the stage widens once (forced) and takes both refills into
// it; where two narrow replicas are, it splits for them as without a predictor.
// DecideNarrow alone, on loads written out: two ranks merged at tp 2 holding three sequences,
// four new prompts of 5 tokens with 10 to go.
TEST(AdaptiveRuleTest, NarrowingForNewPromptsIsThePredictorsCallAndStartTpWithoutOne) {
  AdaptiveOptions o;
  o.generate.slots = 4;
  const std::vector<ReplicaLoad> held{{{20, 6}, {12, 9}, {30, 2}}};
  const ReplicaLoad added(4, {5, 10});
  EXPECT_EQ(DecideNarrow(o, nullptr, {1, 2}, 2, 2, held, added).to, 1) << "no predictor: back to start_tp";
  const LatencyModel wide = Profile(10, 0.001), narrow = Profile(0.5, 0.001), costly = Profile(0.9, 100);
  const Decision stay = DecideNarrow(o, &wide, {1, 2}, 2, 2, held, added);
  EXPECT_EQ(stay.to, 2);
  EXPECT_GT(stay.estimate.total_s(), stay.estimate.stay_s);
  const Decision split = DecideNarrow(o, &narrow, {1, 2}, 2, 2, held, added);
  EXPECT_EQ(split.to, 1);
  EXPECT_LT(split.estimate.total_s(), split.estimate.stay_s);
  EXPECT_GT(split.estimate.migrate_s, 0);
  // Narrow replicas a little faster, but the move costs a 100 s reshard: stay.
  EXPECT_EQ(DecideNarrow(o, &costly, {1, 2}, 2, 2, held, added).to, 2);
  // The margin guards staying, not splitting: with one near 1 staying must be ~100x faster.
  o.margin = 0.99;
  EXPECT_EQ(DecideNarrow(o, &wide, {1, 2}, 2, 2, held, added).to, 1) << "splitting is the default";
  EXPECT_EQ(Deal({2, 0, 1}, 4), (std::vector<int>{1, 1, 2, 0}));
}

TEST(AdaptiveGenerateTest, WithAPredictorRefillsStayWideWhereWideReplicasAreFasterForFullBatches) {
  const Fixture f = MakeFixture(Architecture::kQwen2);
  const RefillRun run = MakeRefill(f);
  const LatencyModel wide = Profile(10, 0.001), narrow = Profile(0.5, 0.001);
  AdaptiveOptions o;
  o.generate = f.gen;
  o.check_every = 2;
  o.force_switch_check = 0;  // widen at the first check whatever the profile
  for (const LatencyModel* profile : {&wide, &narrow}) {
    o.predictor = profile;
    const char* what = profile == &wide ? "wide faster" : "narrow faster";
    RefillSource src(&run);
    const auto results = RunRefill(f, run, o, &src);
    ExpectRefilled(run, src, results, what);
    const int widened = Count(results[0].switches, 1, 2), split = Count(results[0].switches, 2, 1);
    for (const SwitchRecord& s : results[0].switches) {
      if (s.from != 2 || s.to != 1) continue;
      // The split's estimate: staying wide against the narrow replicas with the new prompts.
      EXPECT_GT(s.predicted.after_s, 0) << what;
      EXPECT_LT(s.predicted.total_s(), s.predicted.stay_s) << what;
    }
    for (const AdaptiveResult& r : results) {
      EXPECT_EQ(r.stays.size(), profile == &wide ? 2u : 0u) << what << ": rank 0's decisions are every rank's";
    }
    for (const StayRecord& s : results[0].stays) {
      // Each stay weighed the split to tp 1 of the held sequences and the new prompts, and found it slower.
      EXPECT_EQ(s.tp, 2) << what;
      EXPECT_EQ(s.to, 1) << what;
      EXPECT_GE(s.added, 1) << what;
      EXPECT_GT(s.ts, 0) << what;
      EXPECT_GT(s.predicted.total_s(), s.predicted.stay_s) << what;
    }
    if (profile == &wide) {
      EXPECT_EQ(widened, 1) << what;
      EXPECT_EQ(split, 0) << what;
      EXPECT_EQ(results[1].trace.back().tp, 2) << what;
    } else {
      EXPECT_GE(split, 1) << what;
    }
  }
}

TEST(AdaptiveGenerateTest, StaticReplicasAndOneReplicaOverEveryRankRefillToo) {
  const Fixture f = MakeFixture(Architecture::kQwen2);
  const RefillRun run = MakeRefill(f);
  AdaptiveOptions o;
  o.generate = f.gen;
  o.check_every = 3;
  o.adaptive = false;
  for (int tp : {1, 2}) {
    o.start_tp = tp;
    RefillSource src(&run);
    const auto results = RunRefill(f, run, o, &src);
    ExpectRefilled(run, src, results, tp == 1 ? "static tp 1" : "static tp 2");
    EXPECT_TRUE(results[0].switches.empty());
  }
}

// Rank 0's source failing mid-stage: rank 0 returns its error, the other rank gives up the stage
// instead of waiting for it.
TEST(AdaptiveGenerateTest, ARefillThatFailsOnRankZeroEndsTheStageOnEveryRank) {
  const Fixture f = MakeFixture(Architecture::kLlama);
  const RefillRun run = MakeRefill(f);
  std::vector<Status> status(2);
  std::vector<bool> abandoned(2, false);
  RunRanks(2, [&](Group& g) {
    AdaptiveOptions o;
    o.generate = f.gen;
    o.generate.max_new_tokens_each.clear();
    o.generate.max_new_tokens = 10;
    o.adaptive = false;
    o.check_every = 2;
    o.refill = true;
    if (g.rank() == 0) {
      o.generate.more_prompts = [](int64_t) -> Result<std::vector<std::vector<int64_t>>> {
        return Status::Unavailable("the queue went away");
      };
    }
    auto r = AdaptiveGenerate(g, *f.whole, run.start, o);
    status[static_cast<size_t>(g.rank())] = r.status();
    if (r.ok()) abandoned[static_cast<size_t>(g.rank())] = r->abandoned;
  });
  EXPECT_EQ(status[0].code(), Code::kUnavailable);
  EXPECT_EQ(status[0].message(), "the queue went away");
  EXPECT_TRUE(status[1].ok()) << status[1].ToString();
  EXPECT_TRUE(abandoned[1]);
}

// Through a rollout group: the leader's more_prompts and on_finished, the follower told by the
// request that the batch refills.
TEST(AdaptiveGenerateTest, ARolloutGroupLeaderRefillsItsBatch) {
  const Fixture f = MakeFixture(Architecture::kQwen2);
  const RefillRun run = MakeRefill(f);
  const LatencyModel fast = Profile(1.8, 0.001);
  RefillSource src(&run);
  GroupGenerateOptions opts;
  opts.predictor = &fast;
  opts.check_every = 2;
  opts.margin = 0;
  const Status follower = LeadWithAFollower(f, opts, [&](Group& g) {
    GroupLeader leader(&g, opts);
    model::GenerateOptions go = f.gen;
    go.max_new_tokens_each.clear();
    go.max_new_tokens = 10;
    go.slots = 6;
    go.more_prompts = src.More();
    go.on_finished = src.Told();
    auto got = leader.Generate(*f.whole, 1, run.start, go, nullptr);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    AdaptiveResult r;
    r.generations = *got;
    r.refills = 2;  // the leader's Generate returns the responses alone
    ExpectRefilled(run, src, {r}, "group");
    EXPECT_TRUE(leader.Stop().ok());
  });
  EXPECT_TRUE(follower.ok()) << follower.ToString();
}

TEST(AdaptiveGenerateTest, BadOptionsAreRefused) {
  const Fixture f = MakeFixture(Architecture::kLlama);
  RunRanks(2, [&](Group& g) {
    AdaptiveOptions o;
    o.generate = f.gen;
    o.start_tp = 3;
    EXPECT_EQ(AdaptiveGenerate(g, *f.whole, f.work.prompts, o).status().code(), Code::kInvalidArgument);
    o.start_tp = 1;  // adaptive without a predictor
    EXPECT_EQ(AdaptiveGenerate(g, *f.whole, f.work.prompts, o).status().code(), Code::kInvalidArgument);
    o.adaptive = false;
    o.refill = true;  // with per-prompt budgets
    EXPECT_EQ(AdaptiveGenerate(g, *f.whole, f.work.prompts, o).status().code(), Code::kInvalidArgument);
  });
}

}  // namespace
}  // namespace rl::dist
