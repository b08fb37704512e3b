// Replays tests/fuzz/corpus/chat/* through the chat template fuzz entry point (tests/fuzz), as
// tests/fuzz/corpus_replay_test.cc does for the queue's targets: every saved input stays a test.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "targets.h"

namespace {

TEST(FuzzCorpusTest, ChatTemplatesSurviveTheCorpus) {
  size_t inputs = 0, rendered = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(RL_SOURCE_DIR) + "/tests/fuzz/corpus/chat")) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string s = bytes.str();
    const int ok = rl::fuzz::FuzzChatTemplate(reinterpret_cast<const uint8_t*>(s.data()), s.size());
    // The seeds (tests/chat/templates, named as there) render both ways; raise.jinja raises, and
    // gemma_style refuses the fixed conversation's roles (it wants user and assistant turns only).
    const std::string name = e.path().filename().string();
    if (name == "control" || name == "macros" || name == "llama31_style") {
      EXPECT_EQ(ok, 2) << name;
    }
    ++inputs;
    rendered += ok > 0 ? 1 : 0;
  }
  EXPECT_GT(inputs, 5u);
  // Most of the corpus renders: it exercises the interpreter, not only the parser's errors.
  EXPECT_GT(rendered * 4, inputs) << rendered << " of " << inputs << " inputs rendered";
}

}  // namespace
