#include "rl/profile/queue_driver.h"

#include <chrono>
#include <deque>

#include "rl/queue/client.h"
#include "rl/queue/pipeline.h"

namespace rl::profile {
namespace {

class RlQueueDriver : public QueueDriver {
 public:
  explicit RlQueueDriver(ClientOptions o) : options_(o), client_(std::move(o)) {}

  Status Prepare() override { return client_.Declare(kBenchTask, {kPayloadColumn}); }

  // Packed straight from the payloads, as hiredis formats XADD from them.
  Status Put(const std::vector<std::string>& payloads) override {
    auto done = client_.PutColumn(kPayloadColumn, payloads);
    if (!done.ok()) return done.status();
    if (done->size() != payloads.size()) return Status::Protocol("put reply names a different number of rows");
    return Status::OK();
  }

  Status Get(size_t max, int wait_ms, Taken* out) override {
    out->Clear();
    queue::GetRequest req;
    req.task = kBenchTask;
    req.count = static_cast<uint32_t>(max);
    req.min = 1;
    req.wait_ms = wait_ms;
    req.lease_ms = 300000;  // longer than any phase: no lease expires during a run
    // Read in place (the stamp is all the bench takes from a row), not copied into Values.
    RL_ASSIGN_OR_RETURN(queue::GetReplyView reply, client_.GetView(req));
    out->lease = reply.lease;
    for (const auto& row : reply.rows) {
      out->indices.push_back(row.index);
      RL_ASSIGN_OR_RETURN(MapView cols, MapView::Of(*row.columns, "row"));
      const msgpack::object* v = cols.Find(kPayloadColumn);
      bool bin = v != nullptr && v->type == msgpack::type::BIN;
      out->stamps_ns.push_back(bin ? PayloadStamp(v->via.bin.ptr, v->via.bin.size) : 0);
    }
    return Status::OK();
  }

  Status Ack(const Taken& taken) override {
    RL_ASSIGN_OR_RETURN(queue::IndexReply r, client_.Ack(kBenchTask, taken.lease, taken.indices));
    return CheckAck(taken, r);
  }

  Status AckPipelined(const std::vector<Taken>& taken, int window, std::vector<double>* latency_us) override {
    if (!pipeline_ || pipeline_->window() != window) {
      options_.sender = NewSenderId("rl-profile-acks");
      pipeline_ = std::make_unique<queue::QueuePipeline>(options_, window);
    }
    std::deque<std::chrono::steady_clock::time_point> sent;
    size_t collected = 0;
    auto collect = [&]() -> Status {
      RL_ASSIGN_OR_RETURN(queue::IndexReply r, pipeline_->Collect());
      latency_us->push_back(
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent.front()).count());
      sent.pop_front();
      return CheckAck(taken[collected++], r);
    };
    for (const Taken& t : taken) {
      if (pipeline_->full()) RL_RETURN_IF_ERROR(collect());
      sent.push_back(std::chrono::steady_clock::now());
      pipeline_->SubmitAck(kBenchTask, t.lease, t.indices);
    }
    while (pipeline_->pending() > 0) RL_RETURN_IF_ERROR(collect());
    return Status::OK();
  }

 private:
  static Status CheckAck(const Taken& taken, const queue::IndexReply& r) {
    if (!r.rejected.empty() || r.done.size() != taken.indices.size()) {
      return Status::Conflict("ack of " + std::to_string(taken.indices.size()) + " rows: " +
                              std::to_string(r.rejected.size()) + " rejected");
    }
    return Status::OK();
  }

  ClientOptions options_;
  queue::QueueClient client_;
  std::unique_ptr<queue::QueuePipeline> pipeline_;  // made at the first AckPipelined
};

}  // namespace

DriverFactory RlQueueDrivers(const std::string& endpoint, double give_up_s) {
  return [endpoint, give_up_s](int client) -> Result<std::unique_ptr<QueueDriver>> {
    ClientOptions o;
    o.endpoint = endpoint;
    o.give_up_s = give_up_s;
    o.sender = NewSenderId("rl-profile-" + std::to_string(client));
    return std::unique_ptr<QueueDriver>(new RlQueueDriver(std::move(o)));
  };
}

}  // namespace rl::profile
