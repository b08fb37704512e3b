#include "rl/weights/chunk_verifier.h"

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <thread>

#include "rl/core/clock.h"
#include "rl/weights/test_util.h"

namespace rl::weights {
namespace {

TEST(ChunkVerifierTest, ReportsEachSubmittedChunkOnceAndFindsTheCorruptOne) {
  std::string bytes = testing::FakeWeights(1 << 20, 1);
  ChunkTable table = ChunkTable::Of(bytes.data(), bytes.size(), 64 << 10);
  bytes[5 * (64 << 10) + 100] ^= 1;  // chunk 5 changes after its CRC was taken
  std::map<size_t, bool> seen;
  {
    ChunkVerifier v(&table, bytes.data());
    for (size_t i = 0; i < table.chunks(); ++i) v.Submit(i);
    int64_t deadline = MonoMillis() + 10000;
    while (v.pending() > 0 && MonoMillis() < deadline) {
      v.WaitForResult(100);
      for (const auto& r : v.Take()) EXPECT_TRUE(seen.emplace(r.chunk, r.ok).second) << r.chunk;
    }
    EXPECT_EQ(v.pending(), 0u);
  }
  ASSERT_EQ(seen.size(), table.chunks());
  for (const auto& [chunk, ok] : seen) EXPECT_EQ(ok, chunk != 5) << chunk;
}

// Destroys *v on a thread of its own; false when that did not end within 10 s (the verifier and
// what it reads are then left to that thread).
bool DestroyedInTime(std::shared_ptr<ChunkVerifier> v, std::shared_ptr<ChunkTable> table) {
  auto gone = std::make_shared<std::atomic<bool>>(false);
  std::thread destroy([v = std::move(v), table = std::move(table), gone]() mutable {
    v.reset();
    *gone = true;
  });
  int64_t deadline = MonoMillis() + 10000;
  while (!*gone && MonoMillis() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (!*gone) {
    destroy.detach();
    return false;
  }
  destroy.join();
  return true;
}

// Results never taken, with its thread idle (every check done) or still checking: the destructor
// returns all the same (it waits for no Take), and once it has, nothing reads the bundle: the
// bytes are then made unreadable, and a read after that ends the test binary with SIGSEGV.
TEST(ChunkVerifierTest, GoesAwayWithChecksNotTaken) {
  std::string small = testing::FakeWeights(1 << 20, 3);
  auto small_table = std::make_shared<ChunkTable>(ChunkTable::Of(small.data(), small.size(), 64 << 10));
  auto idle = std::make_shared<ChunkVerifier>(small_table.get(), small.data());
  for (size_t i = 0; i < small_table->chunks(); ++i) idle->Submit(i);
  idle->WaitForResult(1000);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // 1 MiB takes well under 1 ms
  ASSERT_TRUE(DestroyedInTime(std::move(idle), small_table)) << "idle, with results not taken";

  const size_t size = 64 << 20;  // some milliseconds of checking still to do when it goes away
  void* mem = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  std::string fake = testing::FakeWeights(size, 2);
  std::memcpy(mem, fake.data(), size);
  auto table = std::make_shared<ChunkTable>(ChunkTable::Of(static_cast<char*>(mem), size, 64 << 10));
  auto busy = std::make_shared<ChunkVerifier>(table.get(), static_cast<char*>(mem));
  for (size_t i = 0; i < table->chunks(); ++i) busy->Submit(i);
  ASSERT_TRUE(DestroyedInTime(std::move(busy), table)) << "still checking";
  ASSERT_EQ(::mprotect(mem, size, PROT_NONE), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::munmap(mem, size);
}

}  // namespace
}  // namespace rl::weights
