// Tests of the judge (judge.h, judge_prompt.h): the template grammar, prob mode against the
// independent python3-torch reference (tests/reference/hf_reference.py) and against itself one
// row at a time (padding must not change a row's verdict), generate mode's extraction, and the
// errors a bad judge directory gives.
#include "rl/reward/judge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "rl/model/generate.h"
#include "rl/model/hf_dir.h"
#include "rl/model/hf_reference.h"
#include "rl/model/model_dir.h"
#include "rl/model/prompt_encoder.h"
#include "rl/model/test_util.h"
#include "rl/reward/judge_prompt.h"

namespace rl::reward {
namespace {

using model::testing::DemoDir;

// The demo's tokenizer and config with random weights: a judge that exists, if not a wise one.
std::string RandomJudgeDir() {
  static const std::string dir = [] {
    std::string d = ::testing::TempDir() + "/judge-" + std::to_string(::getpid());
    model::ModelConfig c = model::ReadHfConfig(DemoDir()).value();
    model::Transformer m = model::Transformer::Create(c, 7).value();
    model::HfSaveOptions so;
    so.tokenizer_from = DemoDir();
    EXPECT_TRUE(model::SaveHfModel(d, m, so).ok());
    return d;
  }();
  return dir;
}

JudgeOptions DemoJudge() {
  JudgeOptions o;
  o.dir = RandomJudgeDir();
  o.prompt_template = "{prompt}{response}=";
  o.verdict = "1";
  o.threshold = 0;
  return o;
}

std::vector<RewardRequest> Rows() {
  return {{"123+456=", "579", "579"}, {"1+2=", "3", "3"}, {"999+999=", "1998", "1998"}, {"5+5=", "", "10"}};
}

TEST(JudgePromptTest, RendersPlaceholdersAndEscapedBraces) {
  auto p = JudgePrompt::Parse("Q {prompt} R {response} A {answer} {{x}}");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Render({"p", "r", "a"}), "Q p R r A a {x}");
  EXPECT_TRUE(p->uses_answer());
  EXPECT_FALSE(JudgePrompt::Parse("{prompt}{response}")->uses_answer());
}

TEST(JudgePromptTest, RefusesUnknownPlaceholdersAndLoneBraces) {
  EXPECT_EQ(JudgePrompt::Parse("{respnse}").status().message(),
            "judge template: unknown placeholder {respnse} at byte 0 (known: {prompt}, {response}, {answer})");
  EXPECT_EQ(JudgePrompt::Parse("a {prompt").status().code(), Code::kInvalidArgument);
  EXPECT_EQ(JudgePrompt::Parse("a } b").status().code(), Code::kInvalidArgument);
}

TEST(JudgeTest, ProbMatchesTheTorchReference) {
  if (model::testing::TorchPython().empty()) GTEST_SKIP() << "no python3 with torch";
  auto judge = JudgeVerifier::Open(DemoJudge());
  ASSERT_TRUE(judge.ok()) << judge.status().ToString();
  auto probs = (*judge)->Probabilities(Rows());
  ASSERT_TRUE(probs.ok()) << probs.status().ToString();
  model::ModelDir dir = model::OpenModelDir(RandomJudgeDir()).value();
  model::PromptEncoder enc = model::PromptEncoder::Create(dir, "auto").value();
  for (size_t i = 0; i < Rows().size(); ++i) {
    task::Example e;
    e.prompt = Rows()[i].prompt + Rows()[i].response + "=";
    std::vector<int64_t> ids = enc.Prompt(e).value();
    at::Tensor logits = model::testing::ReferenceLogits(RandomJudgeDir(), ids);
    ASSERT_TRUE(logits.defined());
    double want = at::softmax(logits[-1], 0)[4].item<double>();  // "1" is id 4
    ASSERT_TRUE((*probs)[i].ok());
    EXPECT_NEAR(*(*probs)[i], want, 1e-5) << "row " << i;
  }
}

TEST(JudgeTest, BatchedProbEqualsOneRowAtATime) {
  auto judge = JudgeVerifier::Open(DemoJudge());
  ASSERT_TRUE(judge.ok()) << judge.status().ToString();
  std::vector<Result<double>> all = (*judge)->ScoreBatch(Rows());
  for (size_t i = 0; i < Rows().size(); ++i) {
    Result<double> one = (*judge)->Score(Rows()[i]);
    ASSERT_TRUE(all[i].ok() && one.ok());
    EXPECT_NEAR(*all[i], *one, 1e-6);
    EXPECT_GT(*one, 0.0);
    EXPECT_LT(*one, 1.0);
  }
}

TEST(JudgeTest, ThresholdTurnsTheProbabilityIntoZeroOrOne) {
  JudgeOptions o = DemoJudge();
  auto soft = JudgeVerifier::Open(o).value()->ScoreBatch(Rows());
  o.threshold = 0.5;
  auto hard = JudgeVerifier::Open(o).value()->ScoreBatch(Rows());
  for (size_t i = 0; i < Rows().size(); ++i) EXPECT_EQ(*hard[i], *soft[i] >= 0.5 ? 1.0 : 0.0);
}

TEST(JudgeTest, AJudgingPromptPastTheContextFailsAlone) {
  std::vector<RewardRequest> rows = Rows();
  rows[1].response = std::string(40, '7');  // the demo's context is 32 tokens
  auto scored = JudgeVerifier::Open(DemoJudge()).value()->ScoreBatch(rows);
  EXPECT_TRUE(scored[0].ok());
  EXPECT_EQ(scored[1].status().code(), Code::kDataError);
  EXPECT_TRUE(scored[2].ok());
}

TEST(JudgeTest, GenerateModeRewardsTheFirstMatchEqualToTheVerdict) {
  JudgeOptions o = DemoJudge();
  o.mode = "generate";
  o.max_new_tokens = 3;
  o.pattern = "[0-9+=]";
  // What the judge says greedily, found independently of the judge's own code path.
  model::ModelDir dir = model::OpenModelDir(o.dir).value();
  model::PromptEncoder enc = model::PromptEncoder::Create(dir, "auto").value();
  model::Transformer m = model::LoadHfModel(o.dir).value();
  task::Example e;
  e.prompt = "123+456=579=";
  model::GenerateOptions g;
  g.max_new_tokens = 3;
  g.sampling.temperature = 0;
  g.eos_id = dir.eos_id;
  auto gen = model::Generate(m, {enc.Prompt(e).value()}, g).value();
  std::string text = enc.Decode(gen[0].response_ids).value();
  std::string first_match;
  for (char c : text) {
    if ((c >= '0' && c <= '9') || c == '+' || c == '=') {
      first_match = c;
      break;
    }
  }
  if (first_match.empty()) GTEST_SKIP() << "the random judge wrote nothing the pattern matches: '" << text << "'";
  o.verdict = first_match;
  EXPECT_EQ(*JudgeVerifier::Open(o).value()->Score(Rows()[0]), 1.0);
  o.verdict = first_match == "1" ? "2" : "1";
  EXPECT_EQ(*JudgeVerifier::Open(o).value()->Score(Rows()[0]), 0.0);
  o.pattern = "x";  // never matches: reward 0, counted
  auto judge = JudgeVerifier::Open(o).value();
  EXPECT_EQ(*judge->Score(Rows()[0]), 0.0);
  EXPECT_EQ(judge->unparsed(), 1u);
}

TEST(JudgeTest, BadDirectoriesAreConfigErrors) {
  JudgeOptions o = DemoJudge();
  o.dir = "/nonexistent/judge";
  EXPECT_EQ(JudgeVerifier::Open(o).status().code(), Code::kConfig);
  o.dir = DemoDir();  // config and tokenizer, no weights
  auto s = JudgeVerifier::Open(o).status();
  EXPECT_EQ(s.code(), Code::kConfig);
  EXPECT_NE(s.message().find("no model.safetensors"), std::string::npos) << s.message();
  o = DemoJudge();
  o.verdict = "12";  // two tokens
  EXPECT_EQ(JudgeVerifier::Open(o).status().code(), Code::kConfig);
  o = DemoJudge();
  o.mode = "generate";
  o.pattern = "(";
  EXPECT_EQ(JudgeVerifier::Open(o).status().code(), Code::kConfig);
}

}  // namespace
}  // namespace rl::reward
