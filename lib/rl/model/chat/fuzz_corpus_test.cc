// Replays tests/fuzz/corpus/chat/* through the chat template fuzz entry point (tests/fuzz), as
// tests/fuzz/corpus_replay_test.cc does for the queue's targets: every saved input stays a test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "targets.h"

namespace {

TEST(FuzzCorpusTest, ChatTemplatesSurviveTheCorpus) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(RL_SOURCE_DIR) + "/tests/fuzz/corpus/chat")) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string s = bytes.str();
    rl::fuzz::FuzzChatTemplate(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    ++n;
  }
  EXPECT_GT(n, 5u);
}

}  // namespace
