#include "rl/queue/wal.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "rl/core/fs.h"

namespace rl::queue {
namespace {

std::string TempLog(const std::string& name) {
  std::string path = ::testing::TempDir() + "/rl-wal-" + name + "-" + std::to_string(::getpid()) + ".log";
  std::filesystem::remove(path);
  return path;
}

std::string Pattern(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    s[i] = static_cast<char>(seed >> 24);
  }
  return s;
}

// A payload made of `parts` pieces of one string, the way a put's lent values reach the log.
WalPayload InPieces(std::shared_ptr<std::string> bytes, size_t parts) {
  WalPayload p;
  p.size = bytes->size();
  size_t step = (bytes->size() + parts - 1) / parts;
  for (size_t at = 0; at < bytes->size(); at += step) {
    p.pieces.emplace_back(bytes->data() + at, std::min(step, bytes->size() - at));
  }
  p.holds.push_back(std::move(bytes));
  return p;
}

std::vector<std::string> ReadAll(const std::string& path, WalScan* scan) {
  std::vector<std::string> got;
  Status s = ReadWal(path, [&](const char* p, size_t n) {
    got.emplace_back(p, n);
    return Status::OK();
  }, scan);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return got;
}

TEST(WalTest, RecordsOfEverySizeAroundTheStageReadBackInOrder) {
  std::string path = TempLog("sizes");
  std::vector<std::string> want;
  {
    auto w = WalWriter::Open(path, 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    // Small ones, one just under and one over the 8 MiB stage, a 4 MiB one after a partial stage.
    for (size_t n : {1u, 4089u, 4096u, 70000u, (8u << 20) - 100u, (9u << 20) + 7u, 3u, 4u << 20, 5000u}) {
      want.push_back(Pattern(n, static_cast<uint32_t>(n)));
      if (n > 100000) {
        (*w)->Append(InPieces(std::make_shared<std::string>(want.back()), 5));
      } else {
        (*w)->Append(want.back());
      }
      if (want.size() % 3 == 0) (*w)->Submit();  // batches of several records
    }
    ASSERT_TRUE((*w)->Sync().ok());
  }
  WalScan scan;
  EXPECT_EQ(ReadAll(path, &scan), want);
  EXPECT_TRUE(scan.tail_error.empty()) << scan.tail_error;
  EXPECT_EQ(scan.good_bytes, scan.file_bytes) << "a clean close cuts the padding";
  std::filesystem::remove(path);
}

// What a writer killed before its clean close leaves: its records, then zeros to the end of the
// block. That, and only that, is padding (DurableStore reads past it in a log before the last).
TEST(WalTest, OnlyZerosToTheEndOfABlockArePadding) {
  std::string path = TempLog("padding");
  {
    auto w = WalWriter::Open(path, 0);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    (*w)->Append(Pattern(100, 1));
    ASSERT_TRUE((*w)->Sync().ok());
  }
  auto whole = ReadFile(path);
  ASSERT_TRUE(whole.ok());
  std::filesystem::remove(path);
  auto scan_of = [](const std::string& bytes) {
    WalScan scan;
    EXPECT_TRUE(ScanWalBytes(bytes, [](const char*, size_t) { return Status::OK(); }, &scan).ok());
    EXPECT_EQ(scan.records, 1u);
    return scan;
  };
  EXPECT_FALSE(scan_of(*whole).zero_padding) << "a clean log has no tail";
  const std::string padded = *whole + std::string(4096 - whole->size(), '\0');
  EXPECT_TRUE(scan_of(padded).zero_padding);
  EXPECT_FALSE(scan_of(padded + std::string(4096, '\0')).zero_padding) << "a block of zeros is more than padding";
  EXPECT_FALSE(scan_of(*whole + std::string(7, '\0')).zero_padding) << "not a whole block";
  std::string dirty = padded;
  dirty[whole->size() + 20] = 1;
  EXPECT_FALSE(scan_of(dirty).zero_padding) << "a byte was written there";
}

TEST(WalTest, AReopenedLogGoesOnAfterItsLastRecord) {
  std::string path = TempLog("reopen");
  std::vector<std::string> want = {Pattern(5000, 1), Pattern(123, 2)};
  {
    auto w = WalWriter::Open(path, 0);
    ASSERT_TRUE(w.ok());
    for (const auto& r : want) (*w)->Append(r);
  }
  uint64_t size = std::filesystem::file_size(path);
  {
    auto w = WalWriter::Open(path, size, size);
    ASSERT_TRUE(w.ok());
    want.push_back(Pattern(3u << 20, 3));
    EXPECT_EQ((*w)->Append(InPieces(std::make_shared<std::string>(want.back()), 2)),
              size + kWalHeaderBytes + want.back().size());
    ASSERT_TRUE((*w)->Flush().ok());
  }
  WalScan scan;
  EXPECT_EQ(ReadAll(path, &scan), want);
  EXPECT_TRUE(scan.tail_error.empty()) << scan.tail_error;
  std::filesystem::remove(path);
}

// Records keep coming while syncs run on the syncer thread: each sync covers what was written
// before it, so synced() trails written() and never passes it, and a last Sync() covers all.
void AppendWhileSyncing(bool direct_io) {
  std::string path = TempLog(direct_io ? "group-direct" : "group-buffered");
  std::vector<std::string> want;
  {
    auto w = WalWriter::Open(path, 0, 0, -1, direct_io);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    uint64_t last_synced = 0;
    for (uint32_t i = 0; i < 2000; ++i) {
      want.push_back(Pattern(1 + (i * 37) % 9000, i));
      uint64_t end = (*w)->Append(want.back());
      if (i % 4 == 3) (*w)->Submit();
      if (i % 16 == 15) (*w)->Submit(), (*w)->RequestSync();
      uint64_t synced = (*w)->synced(), written = (*w)->written();
      ASSERT_LE(synced, written);
      ASSERT_LE(written, end);
      ASSERT_GE(synced, last_synced) << "synced() went back";
      last_synced = synced;
    }
    if (!direct_io) {
      EXPECT_EQ((*w)->written(), (*w)->appended()) << "through the page cache Submit writes at once";
    }
    ASSERT_TRUE((*w)->Sync().ok());
    EXPECT_EQ((*w)->synced(), (*w)->appended());
  }
  WalScan scan;
  EXPECT_EQ(ReadAll(path, &scan), want);
  EXPECT_TRUE(scan.tail_error.empty()) << scan.tail_error;
  EXPECT_EQ(scan.good_bytes, scan.file_bytes);
  std::filesystem::remove(path);
}

TEST(WalTest, SyncsRunBesideTheWritesAndCoverWhatWasWrittenBeforeThem) { AppendWhileSyncing(true); }
TEST(WalTest, ThroughThePageCacheTheOwnerWritesAtSubmitAndTheSyncerSyncs) { AppendWhileSyncing(false); }

}  // namespace
}  // namespace rl::queue
