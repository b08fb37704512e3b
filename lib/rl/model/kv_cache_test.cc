#include "rl/model/kv_cache.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <deque>
#include <map>

#include "rl/model/test_util.h"
#include "rl/model/transformer.h"

namespace rl::model {
namespace {

using testing::TinyConfig;

at::Tensor Row(const std::vector<int64_t>& ids) { return at::tensor(ids, at::kLong).unsqueeze(0); }

// Decodes `sequences` through a cache with `slots` slots: each sequence starts with a prefill of
// its first `prefill` tokens, then one token per step, batched with whatever the other slots are
// doing; a finished slot is reset and refilled with the next sequence at once. Checks every
// logit against a full forward pass over the sequence.
void CheckIncrementalMatchesFull(const ModelConfig& config, int64_t slots,
                                 const std::vector<std::vector<int64_t>>& sequences,
                                 int64_t prefill) {
  auto model = Transformer::Create(config, 7);
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  testing::ScaleWeights(&*model, 4.0);  // sharper attention than at initialization
  auto cache = KvCache::Create(config, slots);
  ASSERT_TRUE(cache.ok()) << cache.status().ToString();

  std::deque<size_t> pending;
  for (size_t i = 0; i < sequences.size(); ++i) pending.push_back(i);
  std::map<size_t, std::vector<at::Tensor>> got;  // sequence -> logits [T_i, V] pieces
  std::vector<int64_t> seq_of(static_cast<size_t>(slots), -1);
  int refills = 0;
  const auto start = [&](int64_t slot) {
    ASSERT_TRUE(cache->Reset(slot).ok());
    const size_t s = pending.front();
    pending.pop_front();
    seq_of[static_cast<size_t>(slot)] = static_cast<int64_t>(s);
    std::vector<int64_t> head(sequences[s].begin(), sequences[s].begin() + prefill);
    auto logits = model->ForwardStep(Row(head), {slot}, &*cache);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    got[s].push_back(logits->squeeze(0));
  };
  for (int64_t slot = 0; slot < slots && !pending.empty(); ++slot) start(slot);
  for (;;) {
    std::vector<int64_t> active, next;
    for (int64_t slot = 0; slot < slots; ++slot) {
      const int64_t s = seq_of[static_cast<size_t>(slot)];
      if (s < 0) continue;
      const auto& seq = sequences[static_cast<size_t>(s)];
      const int64_t len = cache->length(slot);
      if (len < static_cast<int64_t>(seq.size())) {
        active.push_back(slot);
        next.push_back(seq[static_cast<size_t>(len)]);
      } else if (!pending.empty()) {
        start(slot);
        ++refills;
      } else {
        seq_of[static_cast<size_t>(slot)] = -1;
      }
    }
    if (active.empty()) {
      bool busy = false;
      for (int64_t s : seq_of) busy = busy || s >= 0;
      if (!busy) break;
      continue;  // a slot was just refilled; its next token goes in the next step
    }
    auto logits = model->ForwardStep(at::tensor(next, at::kLong).unsqueeze(1), active, &*cache);
    ASSERT_TRUE(logits.ok()) << logits.status().ToString();
    for (size_t b = 0; b < active.size(); ++b) {
      got[static_cast<size_t>(seq_of[static_cast<size_t>(active[b])])].push_back(
          (*logits)[static_cast<int64_t>(b)]);
    }
  }
  EXPECT_GT(refills, 0);
  for (size_t s = 0; s < sequences.size(); ++s) {
    auto full = model->Forward(Row(sequences[s]));
    ASSERT_TRUE(full.ok()) << full.status().ToString();
    const at::Tensor incremental = at::cat(got[s], 0);
    ASSERT_EQ(incremental.sizes(), full->squeeze(0).sizes());
    const double diff = (incremental - full->squeeze(0)).abs().max().item<double>();
    EXPECT_LT(diff, 1e-4) << "sequence " << s;
  }
}

const std::vector<std::vector<int64_t>> kSequences = {
    {1, 4, 5, 13, 6, 7, 14, 3, 4, 2},
    {1, 9, 13, 9, 14, 4, 12, 2},
    {1, 3, 3, 3, 13, 12, 12, 12, 14, 3, 3, 3, 2},
    {1, 5, 13, 5, 14, 3, 2},
    {1, 7, 8, 9, 13, 3, 14, 7, 8, 9, 10, 11, 12, 3, 4, 2},  // fills the whole context
};

TEST(KvCacheTest, IncrementalDecodingMatchesFullForwardLlamaGroupedQuery) {
  CheckIncrementalMatchesFull(TinyConfig(Architecture::kLlama, true, 2), 3, kSequences, 3);
}

TEST(KvCacheTest, IncrementalDecodingMatchesFullForwardQwen2Biases) {
  CheckIncrementalMatchesFull(TinyConfig(Architecture::kQwen2, true, 4), 3, kSequences, 3);
}

TEST(KvCacheTest, IncrementalDecodingMatchesFullForwardQwen3Untied) {
  CheckIncrementalMatchesFull(TinyConfig(Architecture::kQwen3, false, 1), 2, kSequences, 1);
}

TEST(KvCacheTest, AllSlotsInOrderUsesTheFastPath) {
  // Every slot every step, in slot order: the no-gather path must agree too.
  CheckIncrementalMatchesFull(TinyConfig(Architecture::kQwen2), 1, kSequences, 2);
}

TEST(KvCacheTest, CacheHoldsKeyValueHeadsInTheModelsDtype) {
  const ModelConfig config = TinyConfig(Architecture::kQwen3, true, 2);
  auto cache = KvCache::Create(config, 3, DType::kBF16);
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ(cache->keys(0).sizes(), (std::vector<int64_t>{3, 2, 16, 16}));
  EXPECT_EQ(cache->values(1).scalar_type(), at::kBFloat16);
  // A float32 model refuses a bfloat16 cache.
  auto model = Transformer::Create(config, 1);
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->ForwardStep(at::ones({1, 2}, at::kLong), {0}, &*cache).status().code(),
            Code::kInvalidArgument);
  auto bf16 = Transformer::Create(config, 1, DType::kBF16);
  ASSERT_TRUE(bf16.ok());
  auto step = bf16->ForwardStep(at::ones({1, 2}, at::kLong), {0}, &*cache);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  const at::Tensor full = *bf16->Forward(at::ones({1, 2}, at::kLong));
  EXPECT_LT((*step - full).abs().max().item<double>(), 0.05);
}

TEST(KvCacheTest, MultiTokenStepsOnSlotsAtDifferentLengths) {
  const ModelConfig config = TinyConfig(Architecture::kLlama);
  auto model = Transformer::Create(config, 2);
  ASSERT_TRUE(model.ok());
  testing::ScaleWeights(&*model, 4.0);
  auto cache = KvCache::Create(config, 3);
  ASSERT_TRUE(cache.ok());
  const std::vector<int64_t> a = {1, 4, 5, 13, 6, 7, 14, 3}, b = {1, 9, 13, 9, 14, 4, 12, 2, 5, 6};
  // Slot 2 holds a (3 tokens in), slot 0 holds b (5 tokens in); then both take 2 more at once.
  ASSERT_TRUE(model->ForwardStep(Row({a.begin(), a.begin() + 3}), {2}, &*cache).ok());
  ASSERT_TRUE(model->ForwardStep(Row({b.begin(), b.begin() + 5}), {0}, &*cache).ok());
  const at::Tensor two = at::tensor({a[3], a[4], b[5], b[6]}, at::kLong).view({2, 2});
  auto step = model->ForwardStep(two, {2, 0}, &*cache);
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  const at::Tensor full_a = model->Forward(Row(a))->squeeze(0).narrow(0, 3, 2);
  const at::Tensor full_b = model->Forward(Row(b))->squeeze(0).narrow(0, 5, 2);
  EXPECT_LT(((*step)[0] - full_a).abs().max().item<double>(), 1e-4);
  EXPECT_LT(((*step)[1] - full_b).abs().max().item<double>(), 1e-4);
  EXPECT_EQ(cache->length(2), 5);
  EXPECT_EQ(cache->length(0), 7);
  EXPECT_EQ(cache->length(1), 0);
}

TEST(KvCacheTest, StepPastTheContextIsRejectedAndLeavesLengths) {
  const ModelConfig config = TinyConfig(Architecture::kLlama);
  auto model = Transformer::Create(config, 1);
  auto cache = KvCache::Create(config, 2);
  ASSERT_TRUE(model.ok() && cache.ok());
  ASSERT_TRUE(model->ForwardStep(at::ones({1, 10}, at::kLong), {1}, &*cache).ok());
  auto r = model->ForwardStep(at::ones({1, 7}, at::kLong), {1}, &*cache);
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_EQ(cache->length(1), 10);
  EXPECT_EQ(cache->length(0), 0);
}

TEST(KvCacheTest, BadSlotsAreRejected) {
  const ModelConfig config = TinyConfig(Architecture::kQwen2);
  auto model = Transformer::Create(config, 1);
  auto cache = KvCache::Create(config, 2);
  ASSERT_TRUE(model.ok() && cache.ok());
  const at::Tensor two = at::ones({2, 1}, at::kLong);
  EXPECT_EQ(model->ForwardStep(two, {0, 0}, &*cache).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(model->ForwardStep(two, {0, 2}, &*cache).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(model->ForwardStep(two, {0}, &*cache).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(model->ForwardStep(at::full({1, 1}, 15, at::kLong), {0}, &*cache).status().code(),
            Code::kInvalidArgument);
  EXPECT_EQ(cache->length(0), 0);
}

}  // namespace
}  // namespace rl::model
