// QueuePipeline: puts, acks and nacks to an rl-queue server with up to `window` of them in
// flight on one connection (rl::Pipeline: one sender id per lane, so each still takes effect
// once across lost replies and server restarts). The server carries them out in submission
// order while the connection holds; Collect returns their replies in that order.
//
//   QueuePipeline p(options, 8);
//   for (...) {
//     if (p.full()) Use(p.Collect());
//     p.SubmitAck(task, lease, indices);
//   }
//   while (p.pending() > 0) Use(p.Collect());
//
// Thread safety: one QueuePipeline per thread.
#pragma once

#include <string>
#include <vector>

#include "rl/queue/client.h"
#include "rl/queue/protocol.h"
#include "rl/wire/pipeline.h"

namespace rl::queue {

class QueuePipeline {
 public:
  QueuePipeline(ClientOptions options, int window) : pipeline_(std::move(options), window) {}
  // Puts from now on stage their large values through `stager` (a client of the same queue, whose
  // Units() is not empty) before they are sent. REQUIRES: *stager outlives the pipeline.
  void StageWith(QueueClient* stager) { stager_ = stager; }

  bool full() const { return pipeline_.full(); }
  size_t pending() const { return pipeline_.pending(); }
  int window() const { return pipeline_.window(); }

  // Each REQUIRES: !full(). A put's reply names the new rows (an update's: its rows and the
  // lease's deadline_ms); an ack's the rows acked; a nack's the rows released. With StageWith, a
  // put's large values are staged on the units first (QueueClient::StagePut), which can fail; a
  // put still in flight half the units' grace after it was staged is refused.
  [[nodiscard]] Status SubmitPut(const PutRequest& req);
  void SubmitAck(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices);
  void SubmitNack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices);
  // The reply of the oldest call not collected. REQUIRES: pending() > 0.
  Result<IndexReply> Collect();

  Pipeline& wire() { return pipeline_; }

 private:
  QueueClient* stager_ = nullptr;
  Pipeline pipeline_;
};

}  // namespace rl::queue
