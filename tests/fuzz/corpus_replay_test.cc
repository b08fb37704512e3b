// Replays tests/fuzz/corpus/<target>/* through the fuzz entry points: every input the fuzzers
// found interesting (and every crash they found, once fixed) stays a test in the normal suite.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "targets.h"

namespace {

size_t Replay(const std::string& target, void (*fn)(const uint8_t*, size_t)) {
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(std::string(RL_CORPUS_DIR) + "/" + target)) {
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string bytes = ss.str();
    fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    ++n;
  }
  return n;
}

TEST(CorpusReplayTest, FrameDecoderSurvivesTheCorpus) { EXPECT_GT(Replay("frames", rl::fuzz::FuzzFrames), 5u); }
TEST(CorpusReplayTest, LogReaderSurvivesTheCorpus) { EXPECT_GT(Replay("wal", rl::fuzz::FuzzWal), 2u); }
TEST(CorpusReplayTest, SnapshotLoaderSurvivesTheCorpus) { EXPECT_GT(Replay("snapshot", rl::fuzz::FuzzSnapshot), 1u); }
TEST(CorpusReplayTest, SmallerDecodersSurviveTheCorpus) { EXPECT_GT(Replay("inputs", rl::fuzz::FuzzInputs), 7u); }

}  // namespace
