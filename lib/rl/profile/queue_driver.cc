#include "rl/profile/queue_driver.h"

#include "rl/queue/client.h"

namespace rl::profile {
namespace {

class RlQueueDriver : public QueueDriver {
 public:
  explicit RlQueueDriver(ClientOptions o) : client_(std::move(o)) {}

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
    if (!r.rejected.empty() || r.done.size() != taken.indices.size()) {
      return Status::Conflict("ack of " + std::to_string(taken.indices.size()) + " rows: " +
                              std::to_string(r.rejected.size()) + " rejected");
    }
    return Status::OK();
  }

 private:
  queue::QueueClient client_;
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
