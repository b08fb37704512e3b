// How a trainer takes the rows of a get (sample.h): SortRows and GroupsOf against malformed rows,
// rows the model cannot take and values that would poison a step; the routes a row carries for
// routing replay, and how they and the reference's routing are checked against the trainer's.
#include "rl/train/sample.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace rl::train {
namespace {

// A trainer takes a get's rows with SortRows: one malformed row costs its group (acked, never
// trained), not the get; a row without a group costs itself; malformed routes alone cost the row
// its replay, not its training. GroupsOf, strict, refuses the same rows.
TEST(SampleRowsTest, SortRowsLeavesOutTheGroupsOfMalformedRowsAndKeepsTheRest) {
  auto row = [](uint64_t index, std::optional<int64_t> group, double reward, std::optional<Tensor> routes) {
    queue::GotRow g;
    g.index = index;
    if (group) g.columns.push_back({"group", *group});
    g.columns.insert(g.columns.end(), {{"prompt_ids", Tensor::FromI64({1, 3})},
                                       {"response_ids", Tensor::FromI64({4, 5})},
                                       {"logprobs", Tensor::FromF32({-1.0f, -1.0f})},
                                       {"reward", reward},
                                       {"version", int64_t{0}}});
    if (routes) g.columns.push_back({"routes", *routes});
    return g;
  };
  Tensor good = Tensor::FromI64({0, 1, 2, 3}), bad = Tensor::FromI64({0, 1, 2, 4});  // expert 4 of 4
  good.shape = bad.shape = {1, 2, 2};
  const RouteLimits limits{2, 2, 4};
  const std::vector<queue::GotRow> rows = {row(1, 7, 1.0, good), row(2, 7, 0.0, std::nullopt),
                                           row(3, 8, 1.0, good), row(4, 8, std::nan(""), good),
                                           row(5, std::nullopt, 1.0, good), row(6, 9, 0.5, bad)};
  SortedRows sorted = SortRows(rows, limits);
  ASSERT_EQ(sorted.groups.size(), 2u);
  EXPECT_EQ(sorted.groups[0].samples.size(), 2u);
  EXPECT_EQ(sorted.groups[0].samples[0].routes.size(), 4u);
  ASSERT_EQ(sorted.groups[1].samples.size(), 1u);
  EXPECT_EQ(sorted.groups[1].samples[0].index, 6u);
  EXPECT_TRUE(sorted.groups[1].samples[0].routes.empty()) << "its routes are not replayed";
  std::vector<uint64_t> dropped = sorted.dropped;
  std::sort(dropped.begin(), dropped.end());
  EXPECT_EQ(dropped, (std::vector<uint64_t>{3, 4, 5})) << "group 8 whole, and the row of no group";
  EXPECT_EQ(sorted.bad_rows, 2);
  EXPECT_EQ(sorted.error.code(), Code::kDataError);
  EXPECT_NE(sorted.error.message().find("row 4: column 'reward'"), std::string::npos) << sorted.error.message();
  EXPECT_EQ(sorted.unreplayable, std::vector<uint64_t>{6});
  EXPECT_NE(sorted.routes_error.message().find("row 6: column 'routes'"), std::string::npos);
  EXPECT_EQ(GroupsOf(rows, limits).status().code(), Code::kDataError);
  EXPECT_EQ(GroupsOf({rows[5]}, limits).status().code(), Code::kDataError) << "strict about routes too";

  SortedRows clean = SortRows({rows[0], rows[1], rows[5]});  // no limits: routes not read
  EXPECT_TRUE(clean.dropped.empty());
  EXPECT_TRUE(clean.error.ok());
  EXPECT_TRUE(clean.unreplayable.empty());
  // Bad routes in a group left out anyway are not counted as trained without them.
  SortedRows both = SortRows({row(10, 9, 1.0, bad), row(11, 9, std::nan(""), good)}, limits);
  EXPECT_TRUE(both.unreplayable.empty());
  EXPECT_TRUE(both.routes_error.ok());
  EXPECT_EQ(both.dropped.size(), 2u);
  EXPECT_EQ(clean.groups.size(), 2u);
}

// Routes reach a trained token when N > P + j - 1, the position it is predicted from: P + R - 1
// (what rl-rollout writes) always does; the response's alone does not; tokens past N that are
// not trained (a tool's result at the end of a conversation) need none.
TEST(SampleRowsTest, RoutesCoverTheTrainedTokensWhenTheyReachTheLastOnesPosition) {
  const RouteLimits limits{2, 2, 4};
  auto sample = [](int64_t n, std::vector<int64_t> mask) {
    Sample s{0, {1, 3, 4}, {5, 6, 7, 2}, std::vector<float>(4, -1.0f), 1, 0, std::move(mask), {}};
    s.routes.assign(static_cast<size_t>(n * 2 * 2), 0);
    return s;
  };
  EXPECT_TRUE(RoutesCoverTrainedTokens(sample(6, {}), limits));    // P + R - 1 = 6
  EXPECT_FALSE(RoutesCoverTrainedTokens(sample(5, {}), limits));   // token 3 is predicted at 5
  EXPECT_FALSE(RoutesCoverTrainedTokens(sample(3, {}), limits));   // the response's alone
  EXPECT_TRUE(RoutesCoverTrainedTokens(sample(4, {1, 1, 0, 0}), limits));  // tokens 2, 3 untrained
  EXPECT_TRUE(RoutesCoverTrainedTokens(sample(0, {}), limits)) << "no routes: the other warning";
  EXPECT_TRUE(RoutesCoverTrainedTokens(sample(3, {}), {})) << "no limits: not replayed";
}

// A row's ref_routing against the trainer's --routing-replay: a warning where the reference
// routed otherwise than the policy will for that row, nothing where they agree or it is not said.
TEST(SampleRowsTest, ARefRoutingThatDisagreesWithTheTrainersIsNamed) {
  Sample routed{7, {1, 3}, {4, 5}, {-1.0f, -1.0f}, 1, 0, {}, {}};
  routed.routes = {0, 1, 2, 3};
  Sample unrouted = routed;
  unrouted.routes.clear();
  auto said = [](Sample s, const std::string& how) {
    s.ref_routing = how;
    return s;
  };
  EXPECT_EQ(RefRoutingMismatch(said(routed, "replayed"), true), "");
  EXPECT_EQ(RefRoutingMismatch(said(routed, "own"), false), "");
  EXPECT_EQ(RefRoutingMismatch(said(unrouted, "own"), true), "") << "nothing to replay: both route on their own";
  EXPECT_EQ(RefRoutingMismatch(said(routed, ""), true), "") << "not said";
  EXPECT_NE(RefRoutingMismatch(said(routed, "own"), true).find("row 7's ref_logprobs come from a reference that routed "
                                                               "on its own"), std::string::npos);
  EXPECT_NE(RefRoutingMismatch(said(routed, "replayed"), false).find("routes on its own"), std::string::npos);
}

// Values that would make a step's loss NaN, or its forward fail (and with it the trainer, and its
// restart on the same rows), are malformed: a logprob that is -inf as a float, a reward whose
// square overflows a group's variance, a token outside the model's vocabulary, a row longer than
// its context. Each costs its group; the rows that are fine still train.
TEST(SampleRowsTest, RowsThatWouldPoisonOrFailTheStepCostTheirGroup) {
  auto row = [](uint64_t index, int64_t group, std::vector<int64_t> prompt, std::vector<int64_t> response,
                double logprob, double reward) {
    queue::GotRow g;
    g.index = index;
    const std::vector<double> lp(response.size(), logprob);
    Tensor lps;
    lps.dtype = DType::kF64;
    lps.shape = {static_cast<int64_t>(lp.size())};
    lps.data.assign(reinterpret_cast<const char*>(lp.data()), lp.size() * sizeof(double));
    g.columns = {{"group", group},         {"prompt_ids", Tensor::FromI64(prompt)},
                 {"response_ids", Tensor::FromI64(response)}, {"logprobs", lps},
                 {"reward", reward},       {"version", int64_t{0}}};
    return g;
  };
  const TokenLimits limits{15, 8};
  const std::vector<queue::GotRow> rows = {
      row(1, 1, {1, 3}, {4, 5}, -0.5, 1.0),        row(2, 1, {1, 3}, {4, 14}, -0.5, 0.0),
      row(3, 2, {1, 3}, {4, 5}, -1e39, 1.0),       row(4, 3, {1, 3}, {4, 5}, -0.5, 1.7e308),
      row(5, 4, {1, 3}, {4, 15}, -0.5, 1.0),       row(6, 5, {-1, 3}, {4}, -0.5, 1.0),
      row(7, 6, {1, 3, 3, 3}, {4, 4, 4, 4, 2}, -0.5, 1.0)};
  const SortedRows sorted = SortRows(rows, {}, limits);
  ASSERT_EQ(sorted.groups.size(), 1u);
  EXPECT_EQ(sorted.groups[0].samples.size(), 2u);
  EXPECT_EQ(sorted.bad_rows, 5);
  const std::vector<std::pair<std::vector<queue::GotRow>, std::string>> cases = {
      {{rows[2]}, "row 3: column 'logprobs' holds a value that is not a finite float"},
      {{rows[3]}, "row 4: column 'reward' is not a reward"},
      {{rows[4]}, "row 5: column 'response_ids' holds token 15, outside the vocabulary [0, 15)"},
      {{rows[5]}, "row 6: column 'prompt_ids' holds token -1"},
      {{rows[6]}, "row 7: column 'response_ids' makes 9 tokens with the prompt, more than the context of 8"}};
  for (const auto& [one, want] : cases) {
    const SortedRows s = SortRows(one, {}, limits);
    EXPECT_TRUE(s.groups.empty()) << want;
    EXPECT_NE(s.error.message().find(want), std::string::npos) << s.error.message();
  }
  EXPECT_EQ(SortRows({rows[4], rows[6]}).bad_rows, 0) << "without limits the tokens are not checked";
}

// Rows come from any client of the queue: GroupsOf takes random columns of every type (tensors of
// every dtype and small shapes, NaN and huge numbers, strings) with a DataError or a group, never
// a crash, with and without route limits.
TEST(SampleRowsTest, GroupsOfRefusesRandomColumnsWithoutCrashing) {
  std::mt19937_64 gen(20261207);
  auto pick = [&](uint64_t n) { return gen() % n; };
  auto value = [&]() -> Value {
    switch (pick(6)) {
      case 0: return int64_t(pick(5)) - 2;
      case 1: return std::vector<double>{std::nan(""), 1e300, -0.5, 1.0, HUGE_VAL}[pick(5)];
      case 2: return std::string("x");
      case 3: return Value{};
      default: {
        Tensor t;
        t.dtype = static_cast<DType>(pick(kDTypeCount));
        const uint64_t rank = pick(4);
        for (uint64_t d = 0; d < rank; ++d) t.shape.push_back(static_cast<int64_t>(pick(4)));
        const size_t n = static_cast<size_t>(t.NumElements()) * DTypeSize(t.dtype);
        for (size_t i = 0; i < n; ++i) t.data.push_back(static_cast<char>(pick(3) == 0 ? gen() : pick(6)));
        return t;
      }
    }
  };
  const std::vector<std::string> names = {"group", "prompt_ids", "response_ids", "logprobs", "reward", "version",
                                          "loss_mask", "token_versions", "ref_logprobs", "turn_ends",
                                          "turn_rewards", "routes"};
  int64_t accepted = 0;
  for (int i = 0; i < 4000; ++i) {
    queue::GotRow r;
    r.index = static_cast<uint64_t>(i);
    // A valid row, then some columns replaced or dropped.
    r.columns = {{"group", int64_t{1}}, {"prompt_ids", Tensor::FromI64({1, 3})}, {"response_ids", Tensor::FromI64({4, 2})},
                 {"logprobs", Tensor::FromF32({-1, -1})}, {"reward", 1.0}, {"version", int64_t{0}}};
    for (const std::string& name : names) {
      if (pick(4) != 0) continue;
      auto at = std::find_if(r.columns.begin(), r.columns.end(), [&](const auto& c) { return c.first == name; });
      if (at != r.columns.end()) r.columns.erase(at);
      if (pick(5) != 0) r.columns.push_back({name, value()});
    }
    for (const RouteLimits& limits : {RouteLimits{}, RouteLimits{2, 2, 4}}) {
      auto got = GroupsOf({r}, limits);
      if (got.ok()) {
        ++accepted;
        ASSERT_EQ(got->size(), 1u);
        const Sample& s = (*got)[0].samples[0];
        EXPECT_TRUE(std::isfinite(s.reward));
        EXPECT_GE(s.version, 0);
        EXPECT_EQ(s.logprobs.size(), s.response_ids.size());
      } else {
        EXPECT_EQ(got.status().code(), Code::kDataError) << got.status().ToString();
      }
    }
  }
  EXPECT_GT(accepted, 100);  // the valid rows untouched by the draw, at least
}

}  // namespace
}  // namespace rl::train
