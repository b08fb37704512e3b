#include "rl/model/sampler.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "rl/model/test_util.h"

namespace rl::model {
namespace {

at::Tensor RandomLogits(int64_t rows, int64_t vocab, uint64_t seed) {
  at::manual_seed(seed);
  return at::randn({rows, vocab}) * 2.0;
}

Sample DrawOnce(const SamplingOptions& o, uint64_t seed, const at::Tensor& logits) {
  auto sampler = Sampler::Create(o, seed);
  EXPECT_TRUE(sampler.ok()) << sampler.status().ToString();
  auto s = sampler->Draw(logits);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return *s;
}

TEST(SamplerTest, SameSeedGivesSamePicks) {
  const at::Tensor logits = RandomLogits(64, 15, 1);
  SamplingOptions o;
  o.temperature = 0.9;
  o.top_k = 8;
  o.top_p = 0.95;
  EXPECT_TRUE(DrawOnce(o, 42, logits).ids.equal(DrawOnce(o, 42, logits).ids));
  EXPECT_FALSE(DrawOnce(o, 42, logits).ids.equal(DrawOnce(o, 43, logits).ids));
}

TEST(SamplerTest, TopKOneEqualsGreedy) {
  const at::Tensor logits = RandomLogits(64, 15, 2);
  SamplingOptions top1;
  top1.top_k = 1;
  SamplingOptions greedy;
  greedy.temperature = 0;
  EXPECT_TRUE(DrawOnce(top1, 5, logits).ids.equal(logits.argmax(-1)));
  EXPECT_TRUE(DrawOnce(greedy, 5, logits).ids.equal(logits.argmax(-1)));
}

TEST(SamplerTest, TinyTopPEqualsGreedy) {
  const at::Tensor logits = RandomLogits(64, 15, 3);
  SamplingOptions o;
  o.top_p = 1e-6;
  EXPECT_TRUE(DrawOnce(o, 9, logits).ids.equal(logits.argmax(-1)));
}

TEST(SamplerTest, LogprobsAreThoseOfTheTemperedDistributionBeforeTruncation) {
  const at::Tensor logits = RandomLogits(32, 15, 4);
  for (double t : {0.5, 1.0, 1.7}) {
    SamplingOptions o;
    o.temperature = t;
    o.top_k = 4;  // truncation does not change the reported logprob
    const Sample s = DrawOnce(o, 11, logits);
    const at::Tensor expected = at::log_softmax(logits / t, -1).gather(1, s.ids.unsqueeze(1)).squeeze(1);
    EXPECT_TRUE(at::allclose(s.logprobs, expected, 0, 1e-6)) << "temperature " << t;
  }
  SamplingOptions greedy;
  greedy.temperature = 0;  // greedy: the model's own logprob of the argmax
  const Sample g = DrawOnce(greedy, 11, logits);
  EXPECT_TRUE(at::allclose(g.logprobs, std::get<0>(at::log_softmax(logits, -1).max(-1)), 0, 1e-6));
}

TEST(SamplerTest, PicksStayInsideTopK) {
  const at::Tensor logits = RandomLogits(256, 15, 5);
  SamplingOptions o;
  o.top_k = 3;
  const Sample s = DrawOnce(o, 13, logits);
  const at::Tensor top3 = std::get<1>(logits.topk(3, -1));
  EXPECT_TRUE((top3 == s.ids.unsqueeze(1)).any(1).all().item<bool>());
}

TEST(SamplerTest, FrequenciesFollowTheDistribution) {
  const at::Tensor row = at::tensor({0.0f, 1.0f, 2.0f});
  const at::Tensor logits = row.unsqueeze(0).expand({20000, 3}).contiguous();
  const Sample s = DrawOnce(SamplingOptions{}, 17, logits);
  const at::Tensor freq = at::bincount(s.ids, {}, 3).to(at::kFloat) / 20000.0;
  EXPECT_TRUE(at::allclose(freq, at::softmax(row, 0), 0, 0.02)) << freq;
}

TEST(SamplerTest, BadOptionsAndShapesAreRejected) {
  SamplingOptions o;
  o.top_p = 0;
  EXPECT_EQ(Sampler::Create(o, 1).status().code(), Code::kInvalidArgument);
  o = SamplingOptions{};
  o.temperature = -1;
  EXPECT_EQ(Sampler::Create(o, 1).status().code(), Code::kInvalidArgument);
  auto sampler = Sampler::Create(SamplingOptions{}, 1);
  ASSERT_TRUE(sampler.ok());
  EXPECT_EQ(sampler->Draw(at::zeros({3})).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(sampler->Draw(at::zeros({2, 3}, at::kLong)).status().code(), Code::kInvalidArgument);
}

// The draw a GPU runs (cumulative sums as tensor operations) picks what the CPU's loop picks: on
// rows with filtered-out zeros, one-hot rows, and draws at the very ends of [0, 1).
TEST(SamplerTest, TensorPicksEqualTheLoopsPicks) {
  at::manual_seed(11);
  at::Tensor probs = at::softmax(at::randn({256, 97}) * 3.0, -1);
  probs.masked_fill_(at::rand({256, 97}) < 0.5, 0.0);  // top-k/top-p style holes
  probs[0].zero_();
  probs[0][40] = 1.0;  // one token left
  probs[1].zero_();
  probs[1][96] = 0.25;  // only the last token, not normalized
  at::Tensor u = at::rand({256}, at::kDouble);
  u[2] = 0.0;
  u[3] = 1.0 - 1e-16;
  const at::Tensor loop = InverseCdfPicks(probs, u), tensor = InverseCdfPicks(probs, u, /*tensor_ops=*/true);
  EXPECT_TRUE(loop.equal(tensor)) << (loop != tensor).sum().item<int64_t>() << " of 256 picks differ";
  EXPECT_EQ(tensor[0].item<int64_t>(), 40);
  EXPECT_EQ(tensor[1].item<int64_t>(), 96);
  EXPECT_GT(probs.gather(1, tensor.unsqueeze(1)).min().item<float>(), 0.0f) << "a pick of probability 0";
}

}  // namespace
}  // namespace rl::model
