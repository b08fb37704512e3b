// ChunkVerifier: checks received chunks against their CRC-32C on a thread of its own, so the
// thread that receives them goes back to UCX at once. Over tcp the receiving thread copies
// every byte out of UCX's buffers; the CRC pass over a 100 MB bundle was a quarter of its time
// besides (perf, 4 MiB chunks), while the sending side had time to spare. Chunks that land in
// order get their CRC as they land (chunk_landing.h); this checks the others: pieces out of
// order, and chunks a test hook may have changed.
//
// Submit a chunk once it has arrived and nothing will write to it until its result is taken;
// Take returns the results in the order the checks finished.
// Thread safety: Submit, Take, WaitForResult and pending from the one thread that owns it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "rl/weights/bundle.h"

namespace rl::weights {

class ChunkVerifier {
 public:
  // REQUIRES: *table and the memory at base (the bundle's bytes) outlive the verifier.
  ChunkVerifier(const ChunkTable* table, const char* base);
  ~ChunkVerifier();  // checks what was submitted, then joins
  ChunkVerifier(const ChunkVerifier&) = delete;
  ChunkVerifier& operator=(const ChunkVerifier&) = delete;

  void Submit(size_t chunk);
  struct Result {
    size_t chunk;
    bool ok;  // its bytes match crcs[chunk]
  };
  std::vector<Result> Take();
  // Sleeps until a result is ready or timeout_ms passes.
  void WaitForResult(int timeout_ms);
  // Chunks submitted whose results were not taken yet.
  size_t pending() const { return pending_; }

 private:
  void Run();
  const ChunkTable* table_;
  const char* base_;
  size_t pending_ = 0;  // the owner's count
  std::mutex mu_;
  std::condition_variable work_, done_;
  std::deque<size_t> queue_;    // guarded by mu_
  std::vector<Result> results_;  // guarded by mu_
  bool quit_ = false;            // guarded by mu_
  std::thread thread_;
};

}  // namespace rl::weights
