// Streaming generation (generate.h, more_prompts and on_finished): prompts added while a call
// runs are generated as if they had been given at the start, each sequence is reported once as
// it stops, and free slots are filled instead of left idle.
#include <gtest/gtest.h>

#include <map>
#include <utility>

#include "rl/model/generate.h"
#include "rl/model/test_util.h"

namespace rl::model {
namespace {

constexpr int64_t kEos = 2;

std::vector<std::vector<int64_t>> Prompts(int n) { return testing::MixedPrompts(n); }

Transformer SharpModel() {
  auto model = Transformer::Create(testing::TinyConfig(Architecture::kQwen2), 3);
  EXPECT_TRUE(model.ok());
  testing::ScaleWeights(&*model, 3.0);
  return *model;
}

GenerateOptions Greedy() {
  GenerateOptions o;
  o.max_new_tokens = 12;
  o.sampling.temperature = 0;
  o.slots = 4;
  o.eos_id = kEos;
  return o;
}

// The prompts after the first `initial`, handed out `per_ask` at a time; records each ask's free slots.
struct Feed {
  Feed(std::vector<std::vector<int64_t>> prompts, size_t first, size_t per)
      : all(std::move(prompts)), next(first), per_ask(per) {}
  std::vector<std::vector<int64_t>> all;
  size_t next, per_ask;
  std::vector<int64_t> free_seen;
  MorePrompts Fn() {
    return [this](int64_t free) -> Result<std::vector<std::vector<int64_t>>> {
      free_seen.push_back(free);
      std::vector<std::vector<int64_t>> out;
      for (size_t k = 0; k < per_ask && next < all.size(); ++k) out.push_back(all[next++]);
      return out;
    };
  }
};

TEST(GenerateStreamTest, AddedPromptsGetTheResponsesOfOneCallOverThemAll) {
  const Transformer model = SharpModel();
  const auto prompts = Prompts(20);
  auto whole = Generate(model, prompts, Greedy());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();

  Feed feed{prompts, 3, 2};
  GenerateOptions o = Greedy();
  o.more_prompts = feed.Fn();
  std::map<size_t, Generation> finished;
  o.on_finished = [&](size_t i, const Generation& g) {
    EXPECT_EQ(finished.count(i), 0u) << "sequence " << i << " finished twice";
    finished[i] = g;
    return Status::OK();
  };
  auto streamed = Generate(model, {prompts[0], prompts[1], prompts[2]}, o);
  ASSERT_TRUE(streamed.ok()) << streamed.status().ToString();
  ASSERT_EQ(streamed->size(), prompts.size());
  ASSERT_EQ(finished.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ((*streamed)[i].response_ids, (*whole)[i].response_ids) << "prompt " << i;
    EXPECT_EQ((*streamed)[i].stop, (*whole)[i].stop) << "prompt " << i;
    EXPECT_EQ(finished[i].response_ids, (*streamed)[i].response_ids) << "prompt " << i;
    ASSERT_EQ((*streamed)[i].logprobs.size(), (*whole)[i].logprobs.size());
    for (size_t j = 0; j < (*whole)[i].logprobs.size(); ++j)
      EXPECT_NEAR((*streamed)[i].logprobs[j], (*whole)[i].logprobs[j], 1e-4);
  }
  for (int64_t free : feed.free_seen) {
    EXPECT_GE(free, 1);
    EXPECT_LE(free, 4);
  }
}

// Batch by batch, 4 slots wait for each batch's longest response; streaming fills each slot
// as it frees, so the same prompts take fewer rounds. Responses run to the end of the context
// (16), so their lengths differ with their prompts' (2 to 6 tokens).
TEST(GenerateStreamTest, FreeSlotsAreFilledInsteadOfWaitingForTheLongest) {
  const Transformer model = SharpModel();
  const auto prompts = Prompts(20);
  GenerateOptions to_the_end = Greedy();
  to_the_end.max_new_tokens = 16;
  int64_t batch_rounds = 0;
  for (size_t at = 0; at < prompts.size(); at += 4) {
    GenerateStats s;
    const std::vector<std::vector<int64_t>> batch(prompts.begin() + at, prompts.begin() + at + 4);
    ASSERT_TRUE(Generate(model, batch, to_the_end, &s).ok());
    batch_rounds += s.steps;
  }
  Feed feed{prompts, 4, 1};
  GenerateOptions o = to_the_end;
  o.more_prompts = feed.Fn();
  GenerateStats s;
  auto streamed = Generate(model, std::vector<std::vector<int64_t>>(prompts.begin(), prompts.begin() + 4), o, &s);
  ASSERT_TRUE(streamed.ok());
  EXPECT_EQ(streamed->size(), prompts.size());
  EXPECT_LT(s.steps, batch_rounds);
}

TEST(GenerateStreamTest, AnEmptyAnswerIsAskedAgainOnlyAfterASequenceStops) {
  const Transformer model = SharpModel();
  int asks = 0, stops = 0;
  GenerateOptions o = Greedy();
  o.more_prompts = [&](int64_t) -> Result<std::vector<std::vector<int64_t>>> {
    ++asks;
    return std::vector<std::vector<int64_t>>();
  };
  o.on_finished = [&](size_t, const Generation&) {
    ++stops;
    return Status::OK();
  };
  auto g = Generate(model, Prompts(3), o);  // 3 prompts, 4 slots: a free slot from the start
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(stops, 3);
  EXPECT_LE(asks, 1 + stops);  // once at the start, then at most once per stop
  EXPECT_GE(asks, 1);
}

TEST(GenerateStreamTest, StartsWithNoPromptsAndEndsWhenNoneCome) {
  const Transformer model = SharpModel();
  Feed feed{Prompts(6), 0, 5};
  GenerateOptions o = Greedy();
  o.more_prompts = feed.Fn();
  auto g = Generate(model, {}, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ(g->size(), 6u);
  for (const Generation& r : *g) EXPECT_FALSE(r.response_ids.empty());
}

TEST(GenerateStreamTest, BadAddedPromptsAndCallbackErrorsEndTheCall) {
  const Transformer model = SharpModel();
  GenerateOptions o = Greedy();
  o.more_prompts = [](int64_t) -> Result<std::vector<std::vector<int64_t>>> {
    return std::vector<std::vector<int64_t>>{{1, 100000}};
  };
  auto bad = Generate(model, Prompts(2), o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), Code::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("added prompt 2"), std::string::npos) << bad.status().message();

  o.more_prompts = [](int64_t) -> Result<std::vector<std::vector<int64_t>>> { return Status::Unavailable("queue gone"); };
  auto gone = Generate(model, Prompts(2), o);
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), Code::kUnavailable);

  o.more_prompts = [](int64_t) -> Result<std::vector<std::vector<int64_t>>> { return std::vector<std::vector<int64_t>>(); };
  o.on_finished = [](size_t, const Generation&) { return Status::DataError("put refused"); };
  auto refused = Generate(model, Prompts(2), o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), Code::kDataError);

  o.on_finished = nullptr;
  o.max_new_tokens_each = {4, 4};
  auto each = Generate(model, Prompts(2), o);
  ASSERT_FALSE(each.ok());
  EXPECT_EQ(each.status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rl::model
