#include "rl/rollout/generate_jsonl.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>

#include "rl/rollout/test_model.h"

namespace rl::rollout {
namespace {

std::vector<nlohmann::json> Lines(const std::string& text) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

class GenerateJsonlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto m = model::Transformer::Create(testing::TinyConfig(), 3);
    ASSERT_TRUE(m.ok());
    model_.emplace(*m);
  }
  Status Run(const std::string& input, std::string* output, double temperature = 0) {
    GenerateJsonlOptions o;
    o.encoder = &testing::DemoEncoder();
    o.generate.sampling.temperature = temperature;
    o.generate.max_new_tokens = 6;
    o.chunk = 2;
    std::istringstream in(input);
    std::ostringstream out;
    Status s = GenerateJsonl(*model_, o, in, out);
    *output = out.str();
    return s;
  }
  std::optional<model::Transformer> model_;
};

TEST_F(GenerateJsonlTest, OneResponseLinePerPromptWithIdsAndLogprobsOfEqualLength) {
  std::string out;
  ASSERT_TRUE(Run("{\"prompt\":\"037+480=\",\"answer\":\"517\"}\n\n{\"prompt\":\"1+1=\"}\n{\"prompt\":\"999+999=\"}\n", &out).ok());
  auto lines = Lines(out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["prompt"], "037+480=");
  EXPECT_EQ(lines[0]["answer"], "517");  // passed through
  for (const auto& j : lines) {
    ASSERT_TRUE(j["response"].is_string());
    ASSERT_EQ(j["response_ids"].size(), j["logprobs"].size());
    EXPECT_GE(j["response_ids"].size(), 1u);
    EXPECT_LE(j["response_ids"].size(), 6u);
    for (const auto& lp : j["logprobs"]) EXPECT_LE(lp.get<double>(), 0.0);
  }
}

TEST_F(GenerateJsonlTest, GreedyIsDeterministicAndSampledRunsRepeatWithTheSeed) {
  std::string a, b, c, d;
  std::string input = "{\"prompt\":\"12+34=\"}\n{\"prompt\":\"5+6=\"}\n{\"prompt\":\"7+8=\"}\n";
  ASSERT_TRUE(Run(input, &a).ok());
  ASSERT_TRUE(Run(input, &b).ok());
  EXPECT_EQ(a, b);
  ASSERT_TRUE(Run(input, &c, 1.0).ok());
  ASSERT_TRUE(Run(input, &d, 1.0).ok());
  EXPECT_EQ(c, d);
}

TEST_F(GenerateJsonlTest, ABadLineStopsTheRunAfterTheLinesBeforeIt) {
  for (const char* bad : {"{\"prompt\":\"1+1=\"", "{\"text\":\"1+1=\"}", "{\"prompt\":\"abc\"}",
                          "{\"prompt\":\"0123456789012345+\"}"}) {
    std::string out;
    Status s = Run(std::string("{\"prompt\":\"1+1=\"}\n") + bad + "\n{\"prompt\":\"2+2=\"}\n", &out);
    EXPECT_EQ(s.code(), Code::kDataError) << bad;
    EXPECT_NE(s.message().find("stdin line 2"), std::string::npos) << s.message();
    EXPECT_EQ(Lines(out).size(), 1u) << bad;
  }
}

}  // namespace
}  // namespace rl::rollout
