#include "rl/rollout/conversation.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <limits>
#include <random>

#include "rl/dist/group_generate.h"
#include "rl/dist/test_ranks.h"
#include "rl/rollout/test_model.h"

namespace rl::rollout {
namespace {

// The agent demo's directory: the demo vocabulary plus '*' 15, '-' 16, <call> 17, </call> 18,
// <result> 19, </result> 20; context 96.
const model::ModelDir& CalcDir() {
  static const model::ModelDir dir =
      model::OpenModelDir(std::string(RL_SOURCE_DIR) + "/share/models/calc-tiny").value();
  return dir;
}

constexpr int64_t kVocab = 21;  // CalcDir's

model::Transformer CalcModel(uint64_t seed) {
  model::ModelConfig c = model::testing::TinyLlama(32, 64, 2, 4, 2, 96);
  c.vocab_size = kVocab;
  return model::Transformer::Create(c, seed).value();
}

// The tool: echoes what it was asked as its output ("E" + the arguments), except calls whose
// arguments hold a '9', which fail. Records every call.
struct EchoTools {
  std::vector<env::ToolCall> seen;
  ToolRunner runner() {
    return [this](const std::vector<env::ToolCall>& calls) -> Result<std::vector<env::ToolResult>> {
      std::vector<env::ToolResult> out;
      for (const env::ToolCall& c : calls) {
        seen.push_back(c);
        env::ToolResult r;
        r.ok = c.arguments.find('9') == std::string::npos;
        if (r.ok) {
          r.output = "12";
          if (c.arguments.find('1') != std::string::npos) r.reward = 0.5;  // an environment's reward
        } else {
          r.error = "no 9s";
          r.kind = "tool-error";
        }
        out.push_back(r);
      }
      return out;
    };
  }
};

ConversationOptions Options() {
  ConversationOptions o;
  o.max_turns = 3;
  o.tool_error_reward = -0.25;
  o.generate.sampling.temperature = 1.0;
  o.generate.slots = 16;
  return o;
}

std::vector<Conversation> Prompts(int n) {
  std::vector<Conversation> out(n);
  for (int i = 0; i < n; ++i) out[i].prompt = {1, 3 + i % 10, 15, 3 + (i * 7) % 10, 14};
  return out;
}

std::vector<Conversation*> Pointers(std::vector<Conversation>& v) {
  std::vector<Conversation*> p;
  for (Conversation& c : v) p.push_back(&c);
  return p;
}

TEST(ConversationTest, ToolTokensMustBeSingleTokens) {
  EXPECT_TRUE(ResolveToolTokens(CalcDir(), ToolFormat{}).ok());
  ToolFormat f;
  f.call_close = "</tool_call>";
  EXPECT_EQ(ResolveToolTokens(CalcDir(), f).status().code(), Code::kConfig);
  EXPECT_EQ(ResolveToolTokens(testing::DemoModelDir(), ToolFormat{}).status().code(), Code::kConfig);
}

// With newer_weights (rl-rollout --on-new-weights interrupt), a turn switches weights mid-segment:
// model tokens carry the version they were sampled with (7, then 8: never back), tool tokens -1,
// and the conversation's oldest version is 7.
TEST(ConversationTest, AMidTurnSwitchStampsEachModelTokenWithItsVersion) {
  const model::Transformer v7 = CalcModel(3), v8 = CalcModel(4);
  ConversationOptions o = Options();
  int calls = 0;
  o.generate.newer_weights = [&]() -> Result<std::optional<model::WeightSwitch>> {
    if (++calls != 4) return std::optional<model::WeightSwitch>();
    return std::optional<model::WeightSwitch>(model::WeightSwitch{&v8, 8});
  };
  ConversationRunner runner(CalcDir(), o, *ResolveToolTokens(CalcDir(), ToolFormat{}));
  std::vector<Conversation> convs = Prompts(8);
  EchoTools tools;
  TurnStats stats;
  ASSERT_TRUE(runner.Turn(v7, 7, Pointers(convs), tools.runner(), 11, &stats).ok());
  EXPECT_EQ(stats.switching.switches, 1);
  int mixed = 0;
  for (const Conversation& c : convs) {
    ASSERT_EQ(c.versions.size(), c.ids.size());
    int64_t last = 7;
    for (size_t i = 0; i < c.ids.size(); ++i) {
      if (!c.mask[i]) {
        EXPECT_EQ(c.versions[i], -1);
        continue;
      }
      EXPECT_TRUE(c.versions[i] == 7 || c.versions[i] == 8) << c.versions[i];
      EXPECT_GE(c.versions[i], last);
      last = c.versions[i];
    }
    EXPECT_EQ(c.OldestVersion(), 7);  // every segment began before the switch (8 slots, 8 prompts)
    mixed += last == 8;
  }
  EXPECT_GT(mixed, 0);
}

TEST(ConversationTest, CallsAreJsonObjectsOrTextForTheDefaultTool) {
  ConversationRunner r(CalcDir(), Options(), *ResolveToolTokens(CalcDir(), ToolFormat{}));
  env::ToolCall a = r.ParseCall("12*34");
  EXPECT_EQ(a.name, "calc");
  EXPECT_EQ(a.arguments, "\"12*34\"");
  env::ToolCall b = r.ParseCall(R"({"name": "search", "arguments": {"q": "x"}})");
  EXPECT_EQ(b.name, "search");
  EXPECT_EQ(b.arguments, R"({"q":"x"})");
  auto tokens = r.ResultTokens({true, "408", "", "", std::nullopt});
  ASSERT_TRUE(tokens.ok());
  EXPECT_EQ(*tokens, (std::vector<int64_t>{19, 7, 3, 11, 20}));  // <result>408</result>, no <bos>
}

// Every invariant of a finished conversation: model tokens have mask 1, a log-prob, this version;
// each closing tag the model wrote is followed by a tool result (mask 0, version -1) that starts
// with <result>; turns within max_turns; what the tool was asked is what followed the model's
// last <call>.
TEST(ConversationTest, ToolResultsAreMaskedAndCallsCarryTheirText) {
  const model::Transformer model = CalcModel(3);
  ConversationRunner runner(CalcDir(), Options(), *ResolveToolTokens(CalcDir(), ToolFormat{}));
  std::vector<Conversation> convs = Prompts(48);
  EchoTools tools;
  TurnStats stats;
  Status finished = runner.Finish(model, 7, Pointers(convs), tools.runner(), 11, &stats);
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  std::vector<std::string> expected;  // the arguments of every call, in any order (turns interleave)
  int64_t calls = 0, errors = 0;
  for (const Conversation& c : convs) {
    EXPECT_TRUE(c.done);
    EXPECT_GE(c.turns, 1);
    EXPECT_LE(c.turns, 3);
    ASSERT_EQ(c.mask.size(), c.ids.size());
    ASSERT_EQ(c.versions.size(), c.ids.size());
    ASSERT_EQ(c.logprobs.size(), c.ids.size());
    EXPECT_LE(c.prompt.size() + c.ids.size(), 96u);
    for (size_t i = 0; i < c.ids.size(); ++i) {
      EXPECT_EQ(c.versions[i], c.mask[i] ? 7 : -1);
      if (c.mask[i]) {
        EXPECT_LE(c.logprobs[i], 0.0f);
      } else {
        EXPECT_EQ(c.logprobs[i], 0.0f);
      }
      const bool model_closed = c.mask[i] && c.ids[i] == 18;
      if (model_closed && i + 1 < c.ids.size()) {
        EXPECT_EQ(c.mask[i + 1], 0);
        EXPECT_EQ(c.ids[i + 1], 19);
      }
      if (model_closed) {
        // The call's text: what followed the segment's last <call> (all of the segment without one).
        size_t from = i;
        while (from > 0 && c.mask[from - 1] && c.ids[from - 1] != 17) --from;
        auto text = CalcDir().tokenizer->Decode(std::vector<int64_t>(c.ids.begin() + from, c.ids.begin() + i));
        ASSERT_TRUE(text.ok());
        expected.push_back(nlohmann::json(*text).dump());
      }
    }
    // Each turn ends after a model token: a </call> for a call, its reward the tool's (0.5 for
    // arguments with a 1, none otherwise) or -0.25 for an error (arguments with a 9); an answer's 0.
    ASSERT_EQ(c.turn_ends.size(), static_cast<size_t>(c.turns));
    ASSERT_EQ(c.turn_rewards.size(), c.turn_ends.size());
    for (size_t k = 0; k < c.turn_ends.size(); ++k) {
      const int64_t end = c.turn_ends[k];
      ASSERT_GE(end, 1);
      ASSERT_LE(end, static_cast<int64_t>(c.ids.size()));
      EXPECT_EQ(c.mask[end - 1], 1);
      if (k > 0) {
        EXPECT_GT(end, c.turn_ends[k - 1]);
      }
      const bool called = c.ids[end - 1] == 18;  // generation stops at </call> only when it closes a call
      if (!called) {
        EXPECT_EQ(c.turn_rewards[k], 0.0f);
        continue;
      }
      int64_t from = end - 1;
      while (from > 0 && c.mask[from - 1] && c.ids[from - 1] != 17) --from;
      const std::string args =
          CalcDir().tokenizer->Decode(std::vector<int64_t>(c.ids.begin() + from, c.ids.begin() + end - 1)).value();
      const float want = args.find('9') != std::string::npos ? -0.25f : args.find('1') != std::string::npos ? 0.5f : 0.f;
      EXPECT_EQ(c.turn_rewards[k], want) << args;
    }
    calls += c.tool_calls;
    errors += c.tool_errors;
  }
  EXPECT_GT(calls, 0) << "the random model never closed a call: the test shows nothing";
  EXPECT_EQ(calls, stats.tool_calls);
  EXPECT_EQ(errors, stats.tool_errors);
  std::vector<std::string> seen;
  for (const env::ToolCall& call : tools.seen) {
    EXPECT_EQ(call.name, "calc");
    seen.push_back(call.arguments);
  }
  std::sort(seen.begin(), seen.end());
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(seen, expected);
}

// Routing replay over a conversation: each segment prefills the whole conversation so far, so the
// routes a conversation keeps (its last segment's) are those a full forward of the mixture-of-
// experts model chooses over every token the conversation fed: the prompt, the model's turns and
// the tool results between them, up to its last model token. A trainer replaying them routes
// every turn as the rollout did, not only the final answer.
TEST(ConversationTest, RecordedRoutesCoverEveryTurnAndToolResult) {
  model::ModelConfig config = model::testing::TinyConfig(model::Architecture::kQwen3Moe);
  config.vocab_size = kVocab;
  config.max_position_embeddings = 96;
  model::Transformer model = model::Transformer::Create(config, 5).value();
  model::testing::RandomizeWeights(&model, 5);
  const int64_t width = config.SparseLayerCount() * config.moe.num_experts_per_tok;
  ConversationOptions o = Options();
  o.generate.record_routes = true;
  ConversationRunner runner(CalcDir(), o, *ResolveToolTokens(CalcDir(), ToolFormat{}));
  std::vector<Conversation> convs = Prompts(48);
  EchoTools tools;
  TurnStats stats;
  Status finished = runner.Finish(model, 7, Pointers(convs), tools.runner(), 11, &stats);
  ASSERT_TRUE(finished.ok()) << finished.ToString();
  int64_t with_tool_results = 0, ending_on_a_call = 0;
  for (size_t i = 0; i < convs.size(); ++i) {
    const Conversation& c = convs[i];
    // Up to the last model token: a conversation whose last turn was a call carries the call's
    // result after it, which no segment fed and nothing trains on.
    const auto last_model = std::find(c.mask.rbegin(), c.mask.rend(), 1);
    ASSERT_NE(last_model, c.mask.rend());
    std::vector<int64_t> fed = c.prompt;
    fed.insert(fed.end(), c.ids.begin(), c.ids.begin() + (c.mask.rend() - last_model - 1));
    ASSERT_EQ(static_cast<int64_t>(c.routes.size()), static_cast<int64_t>(fed.size()) * width) << "conversation " << i;
    at::Tensor want;
    model::Routes record;
    record.record = &want;
    ASSERT_TRUE(model.Forward(at::tensor(fed, at::kLong).unsqueeze(0), record).ok());
    const at::Tensor got = at::tensor(c.routes, at::kInt).to(at::kLong).view_as(want);
    EXPECT_TRUE(got.equal(want)) << "conversation " << i << ", " << c.turns << " turns";
    with_tool_results += std::count(c.mask.begin(), c.mask.begin() + c.answer_from, 0) > 0;
    ending_on_a_call += c.mask.back() == 0;
  }
  EXPECT_GT(with_tool_results, 0) << "no conversation called a tool before its answer: the test shows nothing";
  EXPECT_GT(ending_on_a_call, 0) << "no conversation ended on a call: its case is not shown";
}

// A rollout group generates the turns' segments (dist::GroupLeader::Generate, the follower
// holding the other half of every layer): the conversations are those of the whole model alone,
// token for token, calls, results and masks included.
TEST(ConversationTest, ARolloutGroupHoldsTheConversationsOfTheWholeModel) {
  const model::Transformer model = CalcModel(3);
  ConversationOptions o = Options();
  // Sampled (greedy, the random model never calls): the group's replica draws with the same seed
  // in the same slot order, and its split sums move the probabilities by float rounding only.
  o.generate.sampling.temperature = 1;
  const ToolTokens tags = *ResolveToolTokens(CalcDir(), ToolFormat{});
  std::vector<Conversation> alone = Prompts(16), grouped = Prompts(16);
  EchoTools alone_tools, group_tools;
  TurnStats alone_stats, group_stats;
  ASSERT_TRUE(ConversationRunner(CalcDir(), o, tags).Finish(model, 7, Pointers(alone), alone_tools.runner(), 11,
                                                            &alone_stats).ok());
  Status follower = Status::Internal("not run");
  dist::testing::RunRanks(2, [&](dist::Group& g) {
    if (g.rank() == 1) {
      model::Transformer start = CalcModel(99);  // its weights come from the leader
      follower = dist::RunGroupFollower(g, start, {});
      return;
    }
    dist::GroupLeader leader(&g, {});
    ConversationRunner runner(CalcDir(), o, tags,
                              [&](const model::Transformer& m, uint64_t version,
                                  const std::vector<std::vector<int64_t>>& prompts, const model::GenerateOptions& go,
                                  model::GenerateStats* gs) { return leader.Generate(m, version, prompts, go, gs); });
    Status s = runner.Finish(model, 7, Pointers(grouped), group_tools.runner(), 11, &group_stats);
    EXPECT_TRUE(s.ok()) << s.ToString();
    EXPECT_TRUE(leader.Stop().ok());
  });
  EXPECT_TRUE(follower.ok()) << follower.ToString();
  EXPECT_GT(alone_stats.tool_calls, 0) << "nothing called a tool: the test shows nothing";
  EXPECT_EQ(group_stats.tool_calls, alone_stats.tool_calls);
  EXPECT_EQ(group_stats.tool_errors, alone_stats.tool_errors);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_EQ(grouped[i].ids, alone[i].ids) << "conversation " << i;
    EXPECT_EQ(grouped[i].mask, alone[i].mask);
    EXPECT_EQ(grouped[i].versions, alone[i].versions);
    EXPECT_EQ(grouped[i].turn_rewards, alone[i].turn_rewards);
    EXPECT_TRUE(grouped[i].done);
  }
}

// A conversation written out after a turn and read back goes on exactly as the one that stayed
// in memory: what a rollout that continues another's row relies on.
TEST(ConversationTest, ProgressRoundTripsAndContinuesTheSameWay) {
  const model::Transformer model = CalcModel(5);
  ConversationRunner runner(CalcDir(), Options(), *ResolveToolTokens(CalcDir(), ToolFormat{}));
  std::vector<Conversation> a = Prompts(24);
  EchoTools tools;
  TurnStats stats;
  ASSERT_TRUE(runner.Turn(model, 1, Pointers(a), tools.runner(), 21, &stats).ok());
  std::vector<Conversation> b;
  for (const Conversation& c : a) {
    auto back = FromProgress(c.prompt, ProgressColumns(c), kVocab);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(back->ids, c.ids);
    EXPECT_EQ(back->mask, c.mask);
    EXPECT_EQ(back->versions, c.versions);
    EXPECT_EQ(back->logprobs, c.logprobs);
    EXPECT_EQ(back->turns, c.turns);
    EXPECT_EQ(back->done, c.done);
    EXPECT_EQ(back->answer_from, c.answer_from);
    EXPECT_EQ(back->turn_ends, c.turn_ends);
    EXPECT_EQ(back->turn_rewards, c.turn_rewards);
    b.push_back(std::move(*back));
  }
  ASSERT_TRUE(runner.Turn(model, 2, Pointers(a), tools.runner(), 22, &stats).ok());
  ASSERT_TRUE(runner.Turn(model, 2, Pointers(b), tools.runner(), 22, &stats).ok());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].ids, b[i].ids);
    EXPECT_EQ(a[i].versions, b[i].versions);
    EXPECT_EQ(a[i].turn_rewards, b[i].turn_rewards);
  }
  // Progress an older rollout wrote, without the turn columns: ends unknown, rewards 0.
  std::vector<std::pair<std::string, Value>> old_cols;
  for (auto& [name, value] : ProgressColumns(a[0])) {
    if (name.rfind("conv_turn_", 0) != 0) old_cols.emplace_back(name, value);
  }
  auto older = FromProgress(a[0].prompt, old_cols, kVocab);
  ASSERT_TRUE(older.ok()) << older.status().ToString();
  EXPECT_EQ(older->turn_ends, std::vector<int64_t>(static_cast<size_t>(a[0].turns), -1));
  EXPECT_EQ(older->turn_rewards, std::vector<float>(static_cast<size_t>(a[0].turns), 0.0f));
  // No progress columns: a fresh conversation. Broken ones: DataError.
  auto fresh = FromProgress({1, 4}, {}, kVocab);
  ASSERT_TRUE(fresh.ok());
  EXPECT_EQ(fresh->turns, 0);
  auto cols = ProgressColumns(a[0]);
  for (auto& [name, value] : cols) {
    if (name == "conv_mask") value = Tensor::FromI64(std::vector<int64_t>(a[0].ids.size(), 2));
  }
  EXPECT_EQ(FromProgress({1, 4}, cols, kVocab).status().code(), Code::kDataError);
  cols = ProgressColumns(a[0]);
  for (auto& [name, value] : cols) {
    if (name == "conv_versions") value = Tensor::FromI64({});
  }
  if (!a[0].ids.empty()) {
    EXPECT_EQ(FromProgress({1, 4}, cols, kVocab).status().code(), Code::kDataError);
  }
  cols = ProgressColumns(a[0]);
  for (auto& [name, value] : cols) {
    if (name == "conv_turn_ends") value = Tensor::FromI64(std::vector<int64_t>(a[0].turn_ends.size() + 1, 1));
  }
  EXPECT_EQ(FromProgress({1, 4}, cols, kVocab).status().code(), Code::kDataError);
  // Progress of a model with a larger vocabulary: its tokens would index out of this embedding.
  ASSERT_FALSE(a[0].ids.empty());
  cols = ProgressColumns(a[0]);
  for (auto& [name, value] : cols) {
    if (name == "conv_ids") {
      std::vector<int64_t> ids = a[0].ids;
      ids.back() = kVocab;
      value = Tensor::FromI64(ids);
    }
  }
  EXPECT_EQ(FromProgress({1, 4}, cols, kVocab).status().message(),
            "conv_ids holds " + std::to_string(kVocab) + ", outside the vocabulary of " + std::to_string(kVocab));
}

// Progress a row holds is bytes from outside: counts too large for its tokens (which an older
// row's missing turn columns would be filled from) and values that are not finite are refused.
TEST(ConversationTest, ProgressWithImpossibleCountsOrNonFiniteValuesIsRefused) {
  Conversation c;
  c.ids = {3, 4, 5};
  c.logprobs = {-0.5f, 0, -0.25f};
  c.mask = {1, 0, 1};
  c.versions = {1, -1, 2};
  c.turns = 2;
  c.tool_calls = 1;
  c.answer_from = 2;
  c.turn_ends = {1, 3};
  c.turn_rewards = {0.5f, 0};
  ASSERT_TRUE(FromProgress({1}, ProgressColumns(c), kVocab).ok());
  auto with = [&](const std::string& column, Value v, bool keep_turn_columns = true) {
    std::vector<std::pair<std::string, Value>> cols;
    for (auto& [name, value] : ProgressColumns(c)) {
      if (!keep_turn_columns && name.rfind("conv_turn_", 0) == 0) continue;
      cols.emplace_back(name, name == column ? v : value);
    }
    return FromProgress({1}, cols, kVocab).status();
  };
  // Without the turn columns, conv_turns says how many to make: 2^60 of them was an abort.
  EXPECT_EQ(with("conv_turns", int64_t{1} << 60, false).code(), Code::kDataError);
  EXPECT_EQ(with("conv_turns", int64_t{4}, false).code(), Code::kDataError) << "more turns than tokens";
  EXPECT_TRUE(with("conv_turns", int64_t{3}, false).ok());
  EXPECT_EQ(with("conv_tool_calls", int64_t{3}).code(), Code::kDataError) << "more calls than turns";
  EXPECT_EQ(with("conv_tool_errors", int64_t{2}).code(), Code::kDataError) << "more errors than calls";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(with("conv_logprobs", Tensor::FromF32({-0.5f, nan, 0})).message(),
            "conv_logprobs holds a value that is not finite");
  EXPECT_EQ(with("conv_turn_rewards", Tensor::FromF32({inf, 0})).message(),
            "conv_turn_rewards holds a value that is not finite");
}

// Columns of every type and size in place of some progress columns, or none of them: FromProgress
// returns a conversation that holds together, or DataError; it never throws or aborts.
TEST(ConversationTest, RandomProgressColumnsAreReadOrRefusedNeverCrash) {
  std::mt19937_64 rng(20261205);
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  auto any_int = [&]() -> int64_t {
    switch (pick(0, 3)) {
      case 0: return pick(-2, 8);
      case 1: return pick(0, kVocab + 1);
      case 2: return std::numeric_limits<int64_t>::max() - pick(0, 2);
      default: return std::numeric_limits<int64_t>::min() + pick(0, 2);
    }
  };
  auto any_value = [&]() -> Value {
    const int64_t length = pick(0, 6);
    switch (pick(0, 6)) {
      case 0: return std::monostate{};
      case 1: return any_int();
      case 2: return static_cast<double>(any_int());
      case 3: return std::string("conv");
      case 4: {
        std::vector<int64_t> v;
        for (int64_t i = 0; i < length; ++i) v.push_back(pick(0, 1) ? pick(-1, 2) : any_int());
        return Tensor::FromI64(v);
      }
      case 5: {
        std::vector<float> v;
        for (int64_t i = 0; i < length; ++i) v.push_back(pick(0, 5) ? -0.5f : std::numeric_limits<float>::quiet_NaN());
        return Tensor::FromF32(v);
      }
      default: {  // an i32 tensor of two dimensions
        Tensor t;
        t.dtype = DType::kI32;
        t.shape = {1, length};
        t.data.assign(static_cast<size_t>(length) * 4, '\1');
        return t;
      }
    }
  };
  // Progress that holds together, a few of whose columns are then left out or replaced.
  Conversation c;
  c.ids = {3, 4, 5, 6};
  c.logprobs = {-0.5f, 0, 0, -0.25f};
  c.mask = {1, 0, 0, 1};
  c.versions = {1, -1, -1, 2};
  c.turns = 2;
  c.tool_calls = 1;
  c.answer_from = 3;
  c.turn_ends = {1, 4};
  c.turn_rewards = {0.5f, 0};
  int read = 0, refused = 0;
  for (int round = 0; round < 20000; ++round) {
    std::vector<std::pair<std::string, Value>> cols = ProgressColumns(c);
    for (int64_t k = pick(1, 3); k > 0 && !cols.empty(); --k) {
      const auto at = cols.begin() + pick(0, static_cast<int64_t>(cols.size()) - 1);
      if (pick(0, 3) == 0) {
        cols.erase(at);
      } else {
        at->second = any_value();
      }
    }
    Result<Conversation> c = FromProgress({1, 4}, cols, kVocab);
    if (!c.ok()) {
      ASSERT_EQ(c.status().code(), Code::kDataError) << c.status().ToString();
      ++refused;
      continue;
    }
    ++read;
    const size_t n = c->ids.size();
    ASSERT_EQ(c->mask.size(), n);
    ASSERT_EQ(c->versions.size(), n);
    ASSERT_EQ(c->logprobs.size(), n);
    ASSERT_EQ(c->turn_ends.size(), static_cast<size_t>(c->turns));
    ASSERT_EQ(c->turn_rewards.size(), c->turn_ends.size());
    ASSERT_LE(c->answer_from, static_cast<int64_t>(n));
  }
  EXPECT_GT(read, 0) << "no random columns were read: the test shows nothing";
  EXPECT_GT(refused, 0);
}

// A tool runner that fails (rl-env unreachable) fails the turn and changes nothing.
TEST(ConversationTest, AFailedToolRoundLeavesTheConversationsAsTheyWere) {
  const model::Transformer model = CalcModel(3);
  ConversationRunner runner(CalcDir(), Options(), *ResolveToolTokens(CalcDir(), ToolFormat{}));
  std::vector<Conversation> convs = Prompts(48);
  ToolRunner down = [](const std::vector<env::ToolCall>&) -> Result<std::vector<env::ToolResult>> {
    return Status::Unavailable("rl-env is down");
  };
  TurnStats stats;
  Status s = runner.Turn(model, 1, Pointers(convs), down, 11, &stats);
  ASSERT_EQ(s.code(), Code::kUnavailable) << "no conversation called a tool: the test shows nothing";
  for (const Conversation& c : convs) {
    EXPECT_TRUE(c.ids.empty());
    EXPECT_EQ(c.turns, 0);
  }
}

}  // namespace
}  // namespace rl::rollout
