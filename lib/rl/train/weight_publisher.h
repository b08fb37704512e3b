// WeightPublisher: rl-train as a weight source (docs/design.md "Weights"). Each new version's snapshot
// is encoded once (the same safetensors bytes as weights-<v>.safetensors) and served as the
// newest version by an in-process Source (rl/weights/source.h), so rollouts and relays can pull
// it over UCX as soon as the step's snapshot is in memory, before the checkpoint is on disk.
//
// Offer() hands a snapshot to the publisher's own thread and returns at once: encoding, the
// chunk CRCs and the copy into UCX shared memory never hold up the training loop. When a snapshot
// still waits as the next one comes, the older is dropped (pullers only ever want the newest).
//
// A version served here may never reach the disk (a trainer killed between Offer and the end of
// its checkpoint write restarts from the step before). So that its number is never reused for
// other weights, `before_serve` records each version durably (rl-train: the queue's metadata
// train.served) before it can be pulled, and the restarted trainer numbers on from there.
//
// Thread safety: Offer and Wait from one thread (the training loop); the rest is the publisher's.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "rl/core/event_log.h"
#include "rl/core/status.h"
#include "rl/model/transformer.h"
#include "rl/weights/bundle.h"
#include "rl/weights/source.h"

namespace rl::train {

struct WeightPublisherOptions {
  std::string bind;  // ZeroMQ endpoint of the source; empty: no publisher
  uint32_t max_pulls = 4;
  uint32_t chunk_size = weights::kDefaultChunkBytes;
  // Called on the publisher's thread before a version can be pulled; when it fails the version
  // is not served (pullers keep the one before, or read checkpoint files). May be empty.
  std::function<Status(uint64_t version)> before_serve;
};

class WeightPublisher {
 public:
  // Binds the source and starts the thread. `events` may be null; it must outlive the publisher.
  static Result<std::unique_ptr<WeightPublisher>> Start(const WeightPublisherOptions& options, EventLog* events);
  ~WeightPublisher();  // serves what is pending, then stops the thread and the source

  // REQUIRES: nothing changes the weights of `snapshot` any more (a Clone of the policy; the
  // checkpoint writer may read it at the same time).
  void Offer(uint64_t version, model::Transformer snapshot);
  // Blocks until every offered snapshot is served or dropped; the status of the last one.
  Status Wait();
  const std::string& endpoint() const { return source_->endpoint(); }

 private:
  struct Job {
    uint64_t version;
    model::Transformer snapshot;
  };
  explicit WeightPublisher(WeightPublisherOptions o, EventLog* events) : options_(std::move(o)), events_(events) {}
  void Run();
  Status Serve(const Job& job);

  WeightPublisherOptions options_;
  EventLog* events_;
  std::unique_ptr<weights::Source> source_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;
  bool busy_ = false, quit_ = false;
  Status last_;
  std::thread thread_;
};

}  // namespace rl::train
