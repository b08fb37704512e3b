#include "rl/weights/chunk_verifier.h"

#include <chrono>

#include "rl/weights/chunk_crc.h"

namespace rl::weights {

ChunkVerifier::ChunkVerifier(const ChunkTable* table, const char* base)
    : table_(table), base_(base), thread_([this] { Run(); }) {}

ChunkVerifier::~ChunkVerifier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    quit_ = true;
  }
  work_.notify_one();
  thread_.join();
}

void ChunkVerifier::Submit(size_t chunk) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(chunk);
  }
  pending_++;
  work_.notify_one();
}

std::vector<ChunkVerifier::Result> ChunkVerifier::Take() {
  std::vector<Result> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(results_);
  }
  pending_ -= out.size();
  return out;
}

void ChunkVerifier::WaitForResult(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [this] { return !results_.empty(); });
}

void ChunkVerifier::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_.wait(lock, [this] { return quit_ || !queue_.empty(); });
    if (queue_.empty()) return;  // quit, with everything submitted checked
    size_t chunk = queue_.front();
    queue_.pop_front();
    lock.unlock();
    bool ok = ChunkCrc(base_ + table_->ChunkOffset(chunk), table_->ChunkLength(chunk)) == table_->crcs[chunk];
    lock.lock();
    results_.push_back(Result{chunk, ok});
    done_.notify_one();
  }
}

}  // namespace rl::weights
