// Replays tests/fuzz/corpus/tokenizer/* through the tokenizer fuzz entry point (tests/fuzz), as
// tests/fuzz/corpus_replay_test.cc does for the queue's targets: every saved input stays a test.
#include <gtest/gtest.h>

#include <filesystem>

#include "rl/model/tokenizer/reference_util.h"
#include "targets.h"

namespace {

TEST(FuzzCorpusTest, TokenizerLoaderSurvivesTheCorpus) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(RL_SOURCE_DIR) + "/tests/fuzz/corpus/tokenizer")) {
    const std::string bytes = rl::tokenizer::testing::ReadAll(e.path().string());
    rl::fuzz::FuzzTokenizer(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  EXPECT_GT(n, 5u);
}

}  // namespace
