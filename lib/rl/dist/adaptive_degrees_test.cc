// Adaptive tensor parallelism beyond one switch: four ranks (threads of this test) laid out as
// four replicas of degree 1, two of degree 2 or one of degree 4, widening as the tail shrinks.
// Greedy tokens must be those of the whole model decoding alone (model::Generate) whatever path
// the stage takes and however the state moves; the predictor must take each step only when it
// pays, and a degree the profile lacks is no candidate.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "rl/dist/adaptive_generate.h"
#include "rl/dist/decode_grid.h"
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

constexpr int kRanks = 4;

struct Fixture {
  ModelConfig config;
  std::optional<Transformer> whole;
  std::vector<std::vector<int64_t>> prompts;
  model::GenerateOptions gen;
  std::vector<Generation> expected;
};

// Four key/value heads, so that every degree up to 4 splits them; Qwen3 with eight query heads
// (grouped-query attention, two per key/value head), Llama with four.
// caps[i]: prompt i's response length (eos off), so that the tail is known.
Fixture MakeFixture(Architecture arch, const std::vector<int64_t>& caps) {
  Fixture f;
  f.config = model::testing::TinyConfig(arch, true, 4);
  if (arch == Architecture::kQwen3) f.config.num_attention_heads = 8;
  f.config.max_position_embeddings = 64;
  auto whole = Transformer::Create(f.config, 3);
  EXPECT_TRUE(whole.ok());
  f.whole.emplace(*whole);
  model::testing::RandomizeWeights(&*f.whole, 5, 0.5);
  for (size_t i = 0; i < caps.size(); ++i) {
    std::vector<int64_t> p;
    for (size_t j = 0; j <= i % 5; ++j) p.push_back(static_cast<int64_t>(i * 5 + j * 3 + 1) % f.config.vocab_size);
    f.prompts.push_back(p);
  }
  f.gen.sampling.temperature = 0;
  f.gen.slots = 3;
  f.gen.max_new_tokens_each = caps;
  auto expected = model::Generate(*f.whole, f.prompts, f.gen);
  EXPECT_TRUE(expected.ok());
  f.expected = *expected;
  return f;
}

// Mostly short, a few long: prompts i % 4 == k go to replica k at degree 1.
std::vector<int64_t> LongTailCaps() {
  std::vector<int64_t> caps;
  for (int i = 0; i < 14; ++i) caps.push_back(i == 2 ? 24 : i == 7 ? 40 : i == 11 ? 30 : 2 + i % 4);
  return caps;
}

std::vector<AdaptiveResult> RunStage(const Fixture& f, const AdaptiveOptions& o) {
  std::vector<AdaptiveResult> results(kRanks);
  RunRanks(kRanks, [&](Group& g) {
    auto r = AdaptiveGenerate(g, *f.whole, f.prompts, o);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    results[static_cast<size_t>(g.rank())] = std::move(*r);
  });
  return results;
}

void ExpectSameTokens(const Fixture& f, const std::vector<AdaptiveResult>& results, const std::string& what) {
  for (size_t r = 0; r < results.size(); ++r) {
    ASSERT_EQ(results[r].generations.size(), f.expected.size()) << what;
    for (size_t i = 0; i < f.expected.size(); ++i) {
      EXPECT_EQ(results[r].generations[i].response_ids, f.expected[i].response_ids)
          << what << ": rank " << r << " prompt " << i;
      EXPECT_EQ(results[r].generations[i].stop, f.expected[i].stop) << what;
      EXPECT_EQ(results[r].generations[i].logprobs.size(), f.expected[i].logprobs.size()) << what;
    }
  }
}

// The degrees a stage went through, as seen by every rank (they must agree).
std::vector<std::pair<int, int>> Path(const std::vector<AdaptiveResult>& results) {
  std::vector<std::pair<int, int>> path;
  for (const SwitchRecord& s : results[0].switches) path.emplace_back(s.from, s.to);
  for (const AdaptiveResult& r : results) {
    EXPECT_EQ(r.switches.size(), path.size());
    for (size_t i = 0; i < r.switches.size() && i < path.size(); ++i) {
      EXPECT_EQ(std::make_pair(r.switches[i].from, r.switches[i].to), path[i]);
    }
  }
  return path;
}

using PathT = std::vector<std::pair<int, int>>;

TEST(AdaptiveDegreesTest, SwitchingThroughEveryDegreeGivesTheSameGreedyTokens) {
  for (Architecture arch : {Architecture::kLlama, Architecture::kQwen3}) {
    const Fixture f = MakeFixture(arch, LongTailCaps());
    const std::string name = arch == Architecture::kLlama ? "llama" : "qwen3";
    AdaptiveOptions o;
    o.generate = f.gen;
    o.check_every = 2;
    o.adaptive = false;
    o.start_tp = 2;  // two replicas of degree 2, static
    ExpectSameTokens(f, RunStage(f, o), name + " static tp 2");
    o.adaptive = true;
    o.force_switch_check = 0;  // widen at every check once nothing is pending
    for (auto move : {AdaptiveOptions::Move::kMigrate, AdaptiveOptions::Move::kRecompute}) {
      o.move = move;
      const std::string what = name + (move == AdaptiveOptions::Move::kMigrate ? " migrated" : " recomputed");
      o.start_tp = 1;
      auto results = RunStage(f, o);
      ExpectSameTokens(f, results, what + " from tp 1");
      EXPECT_EQ(Path(results), (PathT{{1, 2}, {2, 4}})) << what;
      for (const SwitchRecord& s : results[0].switches) {
        EXPECT_GT(s.sequences, 0) << what;
        EXPECT_EQ(s.recompute, move == AdaptiveOptions::Move::kRecompute) << what;
      }
      for (const AdaptiveResult& r : results) EXPECT_EQ(r.trace.back().tp, 4) << what;
      o.start_tp = 2;
      results = RunStage(f, o);
      ExpectSameTokens(f, results, what + " from tp 2");
      EXPECT_EQ(Path(results), (PathT{{2, 4}})) << what;
    }
  }
}

// A profile whose per-step time for a replica of batch B is a + b*B at each degree (flat in
// context); `degrees` says which degrees it has.
LatencyModel Profile(const std::map<int, std::pair<double, double>>& degrees, double reshard_s) {
  std::vector<DecodePoint> d;
  std::vector<PrefillPoint> p;
  for (const auto& [tp, ab] : degrees) {
    for (int64_t b : {1, 4}) {
      for (int64_t t : {0, 400}) d.push_back({tp, b, t, ab.first + ab.second * static_cast<double>(b)});
    }
    p.push_back({tp, 1, 0.0001});
    p.push_back({tp, 64, 0.001});
  }
  auto m = LatencyModel::Create(d, p, {1e9, reshard_s, 1024});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return *m;
}

TEST(AdaptiveDegreesTest, ThePredictorWidensStepByStepWhenEachStepPays) {
  // Two long responses on replicas 2 and 3, one ending before the other. Degree 2 is fastest for
  // two sequences on two replicas, degree 4 for the last one alone.
  std::vector<int64_t> caps(8, 2);
  caps[2] = 20;
  caps[3] = 44;
  const Fixture f = MakeFixture(Architecture::kQwen2, caps);
  AdaptiveOptions o;
  o.generate = f.gen;
  o.check_every = 2;
  const LatencyModel stepwise = Profile({{1, {0, 0.010}}, {2, {0.002, 0.006}}, {4, {0.0005, 0.006}}}, 0.0001);
  o.predictor = &stepwise;
  auto results = RunStage(f, o);
  ExpectSameTokens(f, results, "stepwise");
  EXPECT_EQ(Path(results), (PathT{{1, 2}, {2, 4}}));
  for (const SwitchRecord& s : results[0].switches) {
    EXPECT_LT(s.predicted.total_s(), s.predicted.stay_s * (1 - o.margin)) << s.from << " -> " << s.to;
  }
  // Wider degrees slower at any batch: it stays.
  const LatencyModel slow = Profile({{1, {0, 0.010}}, {2, {0.01, 0.02}}, {4, {0.02, 0.02}}}, 0.0001);
  o.predictor = &slow;
  results = RunStage(f, o);
  ExpectSameTokens(f, results, "slow");
  EXPECT_TRUE(Path(results).empty());
  // Faster, but each switch costs more than it saves: it stays.
  const LatencyModel costly = Profile({{1, {0, 0.010}}, {2, {0.002, 0.006}}, {4, {0.0005, 0.006}}}, 100);
  o.predictor = &costly;
  EXPECT_TRUE(Path(RunStage(f, o)).empty());
  // An old profile of degrees 1 and N only: degree 2 is no candidate, so it goes to 4 at once.
  const LatencyModel ends = Profile({{1, {0, 0.010}}, {4, {0.0005, 0.004}}}, 0.0001);
  o.predictor = &ends;
  results = RunStage(f, o);
  ExpectSameTokens(f, results, "tp 1 and 4 only");
  EXPECT_EQ(Path(results), (PathT{{1, 4}}));
}

// A rollout group of four (a leader and three followers whose own weights differ until the
// leader's arrive) generates as the whole model does with a profile that widens it step by step,
// twice in a row: the second batch reuses the subgroups the first made.
TEST(AdaptiveDegreesTest, ARolloutGroupOfFourGivesTheWholeModelsTokens) {
  std::vector<int64_t> caps(8, 2);
  caps[2] = 20;
  caps[3] = 44;
  const Fixture f = MakeFixture(Architecture::kQwen2, caps);
  const LatencyModel stepwise = Profile({{1, {0, 0.010}}, {2, {0.002, 0.006}}, {4, {0.0005, 0.006}}}, 0.0001);
  std::vector<Status> followers(kRanks, Status::OK());
  RunRanks(kRanks, [&](Group& g) {
    GroupGenerateOptions opts;
    opts.predictor = &stepwise;
    opts.check_every = 2;
    if (g.rank() != 0) {
      auto own = Transformer::Create(f.config, 99);
      ASSERT_TRUE(own.ok());
      followers[static_cast<size_t>(g.rank())] = RunGroupFollower(g, *own, opts);
      return;
    }
    GroupLeader leader(&g, opts);
    model::GenerateOptions go = f.gen;
    go.slots = 12;  // three per replica, as in the fixture
    for (int batch = 0; batch < 2; ++batch) {
      auto got = leader.Generate(*f.whole, 1, f.prompts, go, nullptr);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      for (size_t i = 0; i < f.expected.size(); ++i) {
        EXPECT_EQ((*got)[i].response_ids, f.expected[i].response_ids) << "batch " << batch << " prompt " << i;
      }
    }
    EXPECT_TRUE(leader.Stop().ok());
  });
  for (const Status& s : followers) EXPECT_TRUE(s.ok()) << s.ToString();
}

TEST(AdaptiveDegreesTest, SubgroupsOfEachDegreeAreMadeOnceAndReused) {
  RunRanks(kRanks, [&](Group& g) {
    auto pair = g.TensorParallelGroup(2);
    ASSERT_TRUE(pair.ok()) << pair.status().ToString();
    EXPECT_EQ(pair->size(), 2);
    EXPECT_EQ(pair->rank(), g.rank() % 2);
    at::Tensor t = at::full({2}, static_cast<float>(g.rank()));
    ASSERT_TRUE(pair->AllReduceSum(t).ok());
    EXPECT_EQ(t[0].item<float>(), g.rank() < 2 ? 1.0f : 5.0f);  // ranks 0+1, 2+3
    auto again = g.TensorParallelGroup(2);  // the same group: no new rendezvous
    ASSERT_TRUE(again.ok());
    auto tp = again->TensorParallel();
    ASSERT_TRUE(tp.ok());
    at::Tensor u = at::ones({3});
    tp->all_reduce(u);
    EXPECT_EQ(u[0].item<float>(), 2.0f);
    EXPECT_EQ(g.TensorParallelGroup(3).status().code(), Code::kInvalidArgument);
    auto all = g.TensorParallelGroup(4);
    ASSERT_TRUE(all.ok());
    EXPECT_EQ(all->size(), 4);
  });
}

TEST(AdaptiveDegreesTest, DegreesAreThoseTheModelSplitsOver) {
  ModelConfig c = model::testing::TinyConfig(Architecture::kLlama, true, 2);  // two key/value heads
  EXPECT_EQ(TensorParallelDegrees(c, 4), (std::vector<int>{1, 2}));
  EXPECT_EQ(ProfiledDegrees(c, 4), (std::vector<int>{1, 2}));
  c.num_key_value_heads = 4;
  EXPECT_EQ(TensorParallelDegrees(c, 4), (std::vector<int>{1, 2, 4}));
  c.intermediate_size = 36;  // the MLP splits in 3, the heads do not
  EXPECT_EQ(TensorParallelDegrees(c, 3), (std::vector<int>{1}));
  c.num_attention_heads = 12;
  c.num_key_value_heads = 6;
  c.hidden_size = 48;
  EXPECT_EQ(TensorParallelDegrees(c, 6), (std::vector<int>{1, 2, 3, 6}));
  EXPECT_EQ(ProfiledDegrees(c, 6), (std::vector<int>{1, 2, 6}));
}

TEST(LatencyModelTest, MergeIntoBalancesByRemainingWorkWithinCapacity) {
  // Four replicas' (length, budget): the two longest budgets land on different new replicas.
  const std::vector<ReplicaLoad> loads{{{5, 3}}, {{5, 40}, {6, 1}}, {{7, 30}}, {{4, 2}, {4, 2}}};
  const auto place = MergeInto(loads, 2, 3);
  ASSERT_EQ(place.size(), 4u);
  EXPECT_NE(place[1][0], place[2][0]);
  std::vector<int64_t> work(2, 0), held(2, 0);
  for (size_t r = 0; r < loads.size(); ++r) {
    for (size_t i = 0; i < loads[r].size(); ++i) {
      work[static_cast<size_t>(place[r][i])] += loads[r][i].second;
      ++held[static_cast<size_t>(place[r][i])];
    }
  }
  EXPECT_EQ(work[0] + work[1], 78);
  EXPECT_LE(std::abs(work[0] - work[1]), 10);  // 40+2+1 | 30+3+2: the capacity of 3 decides the last
  EXPECT_LE(held[0], 3);
  EXPECT_LE(held[1], 3);
  // Capacity one: one sequence per replica, whatever the work.
  const auto one = MergeInto({{{1, 9}, {1, 8}}}, 2, 1);
  EXPECT_NE(one[0][0], one[0][1]);
  // The estimate at degree 2 over two replicas is the slower one's.
  auto m = LatencyModel::Create({{1, 1, 0, 0.01}, {2, 1, 0, 0.006}}, {{1, 1, 0.001}, {2, 1, 0.001}}, {1e9, 0, 8});
  ASSERT_TRUE(m.ok());
  const SwitchEstimate e = m->EstimateSwitch(1, 2, {{{1, 10}}, {{1, 4}}, {}, {}}, 2, 2);
  EXPECT_DOUBLE_EQ(e.stay_s, 10 * 0.01);
  EXPECT_DOUBLE_EQ(e.after_s, 10 * 0.006);
}

}  // namespace
}  // namespace rl::dist
