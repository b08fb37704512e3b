// Evaluation plumbing: what the verifier is asked (question, decoded response, answer), greedy
// pass@1 against sampled mean@k, refusals counted, and SFT examples encoded for any dataset.
#include "rl/train/evaluate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "rl/model/test_util.h"
#include "rl/train/sft.h"

namespace rl::train {
namespace {

// Scores by a rule on the response text, and remembers what it was asked.
class RecordingVerifier : public reward::Verifier {
 public:
  Result<double> Score(const reward::RewardRequest& req) override {
    asked.push_back(req);
    if (req.answer == "refuse") return Status::DataError("cannot score this one");
    return req.response.size() % 2 == 0 ? 1.0 : 0.0;
  }
  std::vector<reward::RewardRequest> asked;
};

class EvaluateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/rl-eval-" + std::to_string(::getpid());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ + "/held.jsonl") << R"({"prompt": "12+34=", "answer": "46"})" "\n"
                                        << R"({"prompt": "1+1=", "answer": "refuse"})" "\n"
                                        << R"({"prompt": "5+5=", "answer": "10"})" "\n";
    auto dir = model::OpenModelDir(model::testing::DemoDir());
    ASSERT_TRUE(dir.ok()) << dir.status().ToString();
    encoder_.emplace(model::PromptEncoder::Create(*dir, "none").value());
    model_.emplace(model::Transformer::Create(model::testing::TinyLlama(16, 32, 1, 2, 0, 32), 3).value());
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::optional<model::PromptEncoder> encoder_;
  std::optional<model::Transformer> model_;
};

TEST_F(EvaluateTest, AsksTheVerifierWithTheQuestionTheDecodedResponseAndTheAnswer) {
  auto set = LoadEvalSet(dir_ + "/held.jsonl", {}, *encoder_, 2);
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  ASSERT_EQ(set->examples.size(), 2u) << "the first `limit` examples";
  EXPECT_EQ(set->prompts[0], (std::vector<int64_t>{1, 4, 5, 13, 6, 7, 14}));
  RecordingVerifier v;
  EvalOptions o;
  o.max_new_tokens = 5;
  auto r = Evaluate(*model_, *encoder_, *set, &v, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(v.asked.size(), 2u);
  EXPECT_EQ(v.asked[0].prompt, "12+34=");
  EXPECT_EQ(v.asked[0].answer, "46");
  EXPECT_EQ(r->unscorable, 1u);
  EXPECT_EQ(r->examples, 2u);
  EXPECT_EQ(r->k, 0);
  // pass@1 is the verifier's mean over both examples, the refused one counting 0.
  double want = v.asked[0].response.size() % 2 == 0 ? 0.5 : 0.0;
  EXPECT_DOUBLE_EQ(r->pass_at_1, want);
}

TEST_F(EvaluateTest, MeanAtKScoresKSamplesPerExample) {
  auto set = LoadEvalSet(dir_ + "/held.jsonl", {}, *encoder_, 3);
  ASSERT_TRUE(set.ok());
  RecordingVerifier v;
  EvalOptions o;
  o.max_new_tokens = 4;
  o.samples = 4;
  auto r = Evaluate(*model_, *encoder_, *set, &v, o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(v.asked.size(), 3u + 12u);
  double sampled = 0;
  for (size_t i = 3; i < v.asked.size(); ++i) {
    EXPECT_EQ(v.asked[i].answer, set->examples[(i - 3) / 4].answer) << "samples stay with their example";
    if (v.asked[i].answer != "refuse") sampled += v.asked[i].response.size() % 2 == 0 ? 1 : 0;
  }
  EXPECT_DOUBLE_EQ(r->mean_at_k, sampled / 12);
  EXPECT_EQ(r->k, 4);
}

TEST_F(EvaluateTest, ARecordTheEncoderCannotTakeNamesItsLine) {
  std::ofstream(dir_ + "/bad.jsonl") << R"({"prompt": "1+1=", "answer": "2"})" "\n" << R"({"prompt": "x", "answer": "2"})" "\n";
  auto set = LoadEvalSet(dir_ + "/bad.jsonl", {}, *encoder_, 10);
  EXPECT_EQ(set.status().code(), Code::kDataError);
  EXPECT_NE(set.status().message().find("bad.jsonl:2"), std::string::npos) << set.status().message();
}

TEST_F(EvaluateTest, SftExamplesAreThePromptThenTheResponseAndEosAndTooLongOnesAreLeftOut) {
  std::ofstream(dir_ + "/sft.jsonl") << R"({"prompt": "12+34=", "response": "46"})" "\n"
                                     << R"({"prompt": "1111111111+2222222222=", "response": "3333333333"})" "\n";
  task::DatasetOptions o;
  o.answer_key = "";
  o.response_key = "response";
  o.require_response = true;
  auto data = task::Dataset::Open(dir_ + "/sft.jsonl", o);
  ASSERT_TRUE(data.ok()) << data.status().ToString();
  auto sft = EncodeSftData(data->get(), *encoder_, 16);
  ASSERT_TRUE(sft.ok()) << sft.status().ToString();
  ASSERT_EQ(sft->samples.size(), 1u);
  EXPECT_EQ(sft->too_long, 1u);
  EXPECT_EQ(sft->samples[0].prompt_ids, (std::vector<int64_t>{1, 4, 5, 13, 6, 7, 14}));
  EXPECT_EQ(sft->samples[0].response_ids, (std::vector<int64_t>{7, 9, 2}));
}

}  // namespace
}  // namespace rl::train
