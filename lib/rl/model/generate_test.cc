#include "rl/model/generate.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "rl/model/test_util.h"

namespace rl::model {
namespace {

using testing::TinyConfig;

constexpr int64_t kEos = 2;

std::vector<std::vector<int64_t>> Prompts(int n) { return testing::MixedPrompts(n); }

Transformer SharpModel(Architecture arch) {
  auto model = Transformer::Create(TinyConfig(arch), 3);
  EXPECT_TRUE(model.ok());
  testing::ScaleWeights(&*model, 3.0);
  return *model;
}

std::vector<Generation> RunAll(const Transformer& model, GenerateOptions o,
                               GenerateStats* stats = nullptr) {
  auto g = Generate(model, Prompts(20), o, stats);
  EXPECT_TRUE(g.ok()) << g.status().ToString();
  return g.ok() ? *g : std::vector<Generation>{};
}

void ExpectSame(const std::vector<Generation>& a, const std::vector<Generation>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].response_ids, b[i].response_ids) << "prompt " << i;
    EXPECT_EQ(a[i].stop, b[i].stop) << "prompt " << i;
    ASSERT_EQ(a[i].logprobs.size(), b[i].logprobs.size());
    for (size_t j = 0; j < a[i].logprobs.size(); ++j)
      EXPECT_NEAR(a[i].logprobs[j], b[i].logprobs[j], 1e-4);
  }
}

GenerateOptions Options(double temperature) {
  GenerateOptions o;
  o.max_new_tokens = 8;
  o.sampling.temperature = temperature;
  o.seed = 123;
  o.slots = 4;
  o.eos_id = kEos;
  return o;
}

TEST(GenerateTest, CacheAndFullForwardAgreeGreedy) {
  for (Architecture p : {Architecture::kLlama, Architecture::kQwen2, Architecture::kQwen3}) {
    const Transformer model = SharpModel(p);
    GenerateOptions o = Options(0);
    const auto cached = RunAll(model, o);
    o.use_kv_cache = false;
    ExpectSame(cached, RunAll(model, o));
  }
}

TEST(GenerateTest, CacheAndFullForwardAgreeSampled) {
  const Transformer model = SharpModel(Architecture::kLlama);
  GenerateOptions o = Options(1.0);
  const auto cached = RunAll(model, o);
  o.use_kv_cache = false;
  ExpectSame(cached, RunAll(model, o));
}

TEST(GenerateTest, FixedSeedIsDeterministic) {
  const Transformer model = SharpModel(Architecture::kQwen2);
  ExpectSame(RunAll(model, Options(1.0)), RunAll(model, Options(1.0)));
  GenerateOptions other = Options(1.0);
  other.seed = 124;
  bool differs = false;
  const auto a = RunAll(model, Options(1.0)), b = RunAll(model, other);
  for (size_t i = 0; i < a.size(); ++i) differs = differs || a[i].response_ids != b[i].response_ids;
  EXPECT_TRUE(differs);
}

TEST(GenerateTest, LogprobsMatchAFullForwardOfTheResponse) {
  const Transformer model = SharpModel(Architecture::kLlama);
  const auto prompts = Prompts(20);
  const auto gens = RunAll(model, Options(1.0));
  for (size_t i = 0; i < gens.size(); ++i) {
    std::vector<int64_t> seq = prompts[i];
    seq.insert(seq.end(), gens[i].response_ids.begin(), gens[i].response_ids.end());
    auto logits = model.Forward(at::tensor(seq, at::kLong).unsqueeze(0));
    ASSERT_TRUE(logits.ok());
    const at::Tensor logp = at::log_softmax(logits->squeeze(0), -1);
    for (size_t j = 0; j < gens[i].response_ids.size(); ++j) {
      const int64_t pos = static_cast<int64_t>(prompts[i].size() + j) - 1;
      EXPECT_NEAR(logp[pos][gens[i].response_ids[j]].item().toFloat(), gens[i].logprobs[j], 1e-4);
    }
  }
}

TEST(GenerateTest, StopsAtEosMaxTokensOrContextAndRefillsSlots) {
  const Transformer model = SharpModel(Architecture::kQwen2);
  GenerateStats stats;
  const auto gens = RunAll(model, Options(1.0), &stats);
  int64_t total = 0, eos = 0;
  for (const Generation& g : gens) {
    ASSERT_FALSE(g.response_ids.empty());
    total += static_cast<int64_t>(g.response_ids.size());
    if (g.stop == StopReason::kEos) {
      ++eos;
      EXPECT_EQ(g.response_ids.back(), kEos);
    } else {
      EXPECT_EQ(g.stop, StopReason::kMaxTokens);
      EXPECT_EQ(g.response_ids.size(), 8u);
    }
    for (size_t j = 0; j + 1 < g.response_ids.size(); ++j) EXPECT_NE(g.response_ids[j], kEos);
  }
  EXPECT_EQ(stats.new_tokens, total);
  // 20 prompts through 4 slots: more rounds than one batch of 8, fewer than running one by one.
  EXPECT_GT(stats.steps, 8);
  EXPECT_LT(stats.steps, total);
}

TEST(GenerateTest, StopsAtTheContext) {
  const Transformer model = SharpModel(Architecture::kLlama);
  GenerateOptions o = Options(1.0);
  o.eos_id = -1;
  o.max_new_tokens = 100;
  std::vector<int64_t> prompt(14, 4);  // context 16: room for two tokens
  auto g = Generate(model, {prompt}, o);
  ASSERT_TRUE(g.ok()) << g.status().ToString();
  EXPECT_EQ((*g)[0].response_ids.size(), 2u);
  EXPECT_EQ((*g)[0].stop, StopReason::kContext);
}

// A tool call's closing tag ends a turn like eos does, and each prompt can have its own budget:
// what a multi-turn conversation needs. The stop token is kept in the response.
TEST(GenerateTest, StopIdsAndPerPromptBudgets) {
  const Transformer model = SharpModel(Architecture::kLlama);
  GenerateOptions o = Options(1.0);
  o.eos_id = -1;
  o.max_new_tokens = 100;
  const auto prompts = Prompts(12);
  auto free_run = Generate(model, prompts, o);
  ASSERT_TRUE(free_run.ok()) << free_run.status().ToString();
  const int64_t stop = (*free_run)[0].response_ids.at(1);  // a token the model does sample
  o.stop_ids = {stop};
  for (size_t i = 0; i < prompts.size(); ++i) o.max_new_tokens_each.push_back(1 + static_cast<int64_t>(i % 3));
  auto gens = Generate(model, prompts, o);
  ASSERT_TRUE(gens.ok()) << gens.status().ToString();
  int stopped = 0;
  for (size_t i = 0; i < gens->size(); ++i) {
    const Generation& g = (*gens)[i];
    ASSERT_FALSE(g.response_ids.empty());
    EXPECT_LE(static_cast<int64_t>(g.response_ids.size()), o.max_new_tokens_each[i]);
    for (size_t j = 0; j + 1 < g.response_ids.size(); ++j) EXPECT_NE(g.response_ids[j], stop);
    if (g.stop == StopReason::kStop) {
      ++stopped;
      EXPECT_EQ(g.response_ids.back(), stop);
    } else {
      EXPECT_EQ(static_cast<int64_t>(g.response_ids.size()), o.max_new_tokens_each[i]);
    }
  }
  EXPECT_GT(stopped, 0);
  o.max_new_tokens_each = {1};  // not one per prompt
  EXPECT_EQ(Generate(model, prompts, o).status().code(), Code::kInvalidArgument);
  o.max_new_tokens_each.clear();
  o.stop_ids = {model.config().vocab_size};
  EXPECT_EQ(Generate(model, prompts, o).status().code(), Code::kInvalidArgument);
}

TEST(GenerateTest, BadPromptsAreRejected) {
  const Transformer model = SharpModel(Architecture::kLlama);
  const GenerateOptions o = Options(1.0);
  EXPECT_EQ(Generate(model, {{}}, o).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Generate(model, {{1, 99}}, o).status().code(), Code::kInvalidArgument);
  EXPECT_EQ(Generate(model, {std::vector<int64_t>(16, 3)}, o).status().code(),
            Code::kInvalidArgument);
}

// Interruptible generation: weights switched mid-call. Each token's log-prob must be that of a
// full forward pass (no cache: an independent path) of the weights of the version it is stamped
// with, at the sampling temperature; and tokens after the switch must not fit the old weights.
// Routing replay: the experts a generation records are those a full forward over the tokens it
// fed (prompt and response but the last) chooses, on both decoding paths and across slot refills.
TEST(GenerateTest, RecordedRoutesAreThoseOfAFullForward) {
  const Transformer model = SharpModel(Architecture::kQwen3Moe);
  const ModelConfig& c = model.config();
  const int64_t width = c.SparseLayerCount() * c.moe.num_experts_per_tok;
  ASSERT_GT(width, 0);
  const auto prompts = Prompts(20);
  for (bool cache : {true, false}) {
    GenerateOptions o = Options(1.0);
    o.use_kv_cache = cache;
    o.record_routes = true;
    const auto gens = RunAll(model, o);
    o.record_routes = false;
    const auto unrecorded = RunAll(model, o);
    ExpectSame(gens, unrecorded);  // recording changes nothing else
    for (size_t i = 0; i < gens.size(); ++i) {
      std::vector<int64_t> fed = prompts[i];
      fed.insert(fed.end(), gens[i].response_ids.begin(), gens[i].response_ids.end() - 1);
      ASSERT_EQ(static_cast<int64_t>(gens[i].routes.size()), static_cast<int64_t>(fed.size()) * width)
          << "prompt " << i;
      at::Tensor want;
      Routes record;
      record.record = &want;
      ASSERT_TRUE(model.Forward(at::tensor(fed, at::kLong).unsqueeze(0), record).ok());
      const at::Tensor got = at::tensor(gens[i].routes, at::kInt).to(at::kLong).view_as(want);
      EXPECT_TRUE(got.equal(want)) << "prompt " << i << (cache ? " (KV cache)" : " (full forward)");
      EXPECT_TRUE(unrecorded[i].routes.empty());
    }
  }
  const Transformer dense = SharpModel(Architecture::kQwen3);
  GenerateOptions o = Options(1.0);
  o.record_routes = true;
  for (const Generation& g : RunAll(dense, o)) EXPECT_TRUE(g.routes.empty());
}

// Options of the interrupt tests: version 1 until the 6th decode step asks for newer weights,
// then `v2` as version 2.
GenerateOptions SwitchAtTheSixthStep(const Transformer* v2, bool cache) {
  GenerateOptions o = Options(0.7);
  o.max_new_tokens = 12;
  o.use_kv_cache = cache;
  o.version = 1;
  auto calls = std::make_shared<int>(0);
  o.newer_weights = [calls, v2]() -> Result<std::optional<WeightSwitch>> {
    if (++*calls != 6) return std::optional<WeightSwitch>();
    return std::optional<WeightSwitch>(WeightSwitch{v2, 2});
  };
  return o;
}

TEST(GenerateTest, InterruptedTokensMatchAFreshForwardOfTheirVersion) {
  for (bool cache : {true, false}) {
    const Transformer v1 = SharpModel(Architecture::kLlama);
    auto made = Transformer::Create(TinyConfig(Architecture::kLlama), 11);
    ASSERT_TRUE(made.ok());
    testing::ScaleWeights(&*made, 3.0);
    const Transformer v2 = *made;
    const GenerateOptions o = SwitchAtTheSixthStep(&v2, cache);
    const std::vector<std::vector<int64_t>> prompts = Prompts(20);
    GenerateStats stats;
    auto gens = Generate(v1, prompts, o, &stats);
    ASSERT_TRUE(gens.ok()) << gens.status().ToString();
    EXPECT_EQ(stats.switches, 1);
    EXPECT_EQ(stats.interrupted, 4);  // every slot was live at the switch
    int mixed = 0, after_switch = 0, unlike_v1 = 0;
    for (size_t i = 0; i < gens->size(); ++i) {
      const Generation& g = (*gens)[i];
      ASSERT_EQ(g.versions.size(), g.response_ids.size());
      ASSERT_FALSE(g.response_ids.empty());
      EXPECT_TRUE(std::is_sorted(g.versions.begin(), g.versions.end())) << "prompt " << i;
      mixed += g.versions.front() == 1 && g.versions.back() == 2;
      std::vector<int64_t> seq = prompts[i];
      seq.insert(seq.end(), g.response_ids.begin(), g.response_ids.end());
      const at::Tensor tokens = at::tensor(seq, at::kLong).unsqueeze(0);
      at::Tensor lp[2];
      for (int v = 0; v < 2; ++v) {
        auto logits = (v == 0 ? v1 : v2).Forward(tokens);
        ASSERT_TRUE(logits.ok());
        lp[v] = at::log_softmax(*logits / 0.7, -1)[0].detach();
      }
      for (size_t j = 0; j < g.response_ids.size(); ++j) {
        const int64_t pos = static_cast<int64_t>(prompts[i].size() + j) - 1;
        ASSERT_TRUE(g.versions[j] == 1 || g.versions[j] == 2);
        const float want = lp[g.versions[j] - 1][pos][g.response_ids[j]].item<float>();
        EXPECT_NEAR(g.logprobs[j], want, 1e-4) << "prompt " << i << " token " << j << " version " << g.versions[j];
        if (g.versions[j] == 2) {
          ++after_switch;
          unlike_v1 += std::abs(lp[0][pos][g.response_ids[j]].item<float>() - g.logprobs[j]) > 1e-3;
        }
      }
    }
    EXPECT_GE(mixed, 1);  // sequences begun under version 1 and finished under 2
    EXPECT_GT(after_switch, 0);
    EXPECT_GT(unlike_v1, after_switch / 2);  // the check can tell the versions apart
  }
}

// Recorded routes across an interrupt: a sequence live at the switch is prefilled again under the
// new weights, which record its routes afresh, so its routes are those a full forward of the new
// weights gives over every token it fed; one that ended before keeps the old weights' routes.
TEST(GenerateTest, RoutesRecordedAcrossAnInterruptAreThoseOfTheLastVersion) {
  const Transformer v1 = SharpModel(Architecture::kQwen3Moe);
  auto made = Transformer::Create(TinyConfig(Architecture::kQwen3Moe), 11);
  ASSERT_TRUE(made.ok());
  testing::ScaleWeights(&*made, 3.0);
  const Transformer v2 = *made;
  for (bool cache : {true, false}) {
    GenerateOptions o = SwitchAtTheSixthStep(&v2, cache);
    o.record_routes = true;
    const std::vector<std::vector<int64_t>> prompts = Prompts(20);
    GenerateStats stats;
    auto gens = Generate(v1, prompts, o, &stats);
    ASSERT_TRUE(gens.ok()) << gens.status().ToString();
    ASSERT_EQ(stats.switches, 1);
    int moved = 0;
    for (size_t i = 0; i < gens->size(); ++i) {
      const Generation& g = (*gens)[i];
      std::vector<int64_t> fed = prompts[i];
      fed.insert(fed.end(), g.response_ids.begin(), g.response_ids.end() - 1);
      const Transformer& last = g.versions.back() == 2 ? v2 : v1;
      at::Tensor want, other;
      Routes record, record_other;
      record.record = &want;
      record_other.record = &other;
      const at::Tensor tokens = at::tensor(fed, at::kLong).unsqueeze(0);
      ASSERT_TRUE(last.Forward(tokens, record).ok());
      ASSERT_TRUE((g.versions.back() == 2 ? v1 : v2).Forward(tokens, record_other).ok());
      ASSERT_EQ(static_cast<int64_t>(g.routes.size()), want.numel()) << "prompt " << i;
      const at::Tensor got = at::tensor(g.routes, at::kInt).to(at::kLong).view_as(want);
      EXPECT_TRUE(got.equal(want)) << "prompt " << i << " version " << g.versions.back() << (cache ? " (KV cache)" : "");
      moved += !want.equal(other);
    }
    EXPECT_GT(moved, 0) << "the two versions route alike: the test shows nothing";
  }
}

TEST(GenerateTest, NewerWeightsOfAnotherVocabularyAreRefused) {
  const Transformer v1 = SharpModel(Architecture::kLlama);
  ModelConfig c = TinyConfig(Architecture::kLlama);
  c.vocab_size += 1;
  auto other = Transformer::Create(c, 5);
  ASSERT_TRUE(other.ok());
  GenerateOptions o = Options(1.0);
  o.newer_weights = [&]() -> Result<std::optional<WeightSwitch>> {
    return std::optional<WeightSwitch>(WeightSwitch{&*other, 2});
  };
  EXPECT_EQ(Generate(v1, Prompts(3), o).status().code(), Code::kInvalidArgument);
}

}  // namespace
}  // namespace rl::model
