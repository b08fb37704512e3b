// QueueClient: typed calls to an rl-queue server over the retrying wire Client. Every call that
// changes state is sent with one request id and retried with it, so it takes effect once even
// when replies are lost or the server restarts in between.
// When the server is a controller with storage units (it publishes queue.units; the client asks
// once, at its first put or get), puts and gets go through the units without the caller seeing
// it: a put stages its large values (IsUnitValue) on the units first and puts references to them,
// a get fetches the values its reply refers to from the units and hands back the reply the caller
// would have had from a queue without units (docs/design.md "Storage units").
// Thread safety: one QueueClient per thread.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/queue/protocol.h"
#include "rl/queue/unit_client.h"
#include "rl/wire/client.h"

namespace rl::queue {

class QueueClient {
 public:
  explicit QueueClient(ClientOptions options) : options_(options), client_(std::move(options)) {}
  ~QueueClient();

  Result<std::vector<uint64_t>> Put(const PutRequest& req);
  // A put under a chosen request id (see Client::CallWithRid): with a stable sender id, repeating
  // it after a crash of this process adds the rows once.
  Result<std::vector<uint64_t>> PutOnce(uint64_t rid, const PutRequest& req);
  // New rows of one bytes column each (EncodePutColumn): what Put does for them, one copy fewer.
  Result<std::vector<uint64_t>> PutColumn(std::string_view column, const std::vector<std::string>& values);
  // An update put (PutRequest::update_task set; InvalidArgument otherwise): writes columns of rows
  // its lease holds, replacing their values, without consuming them. Returns the lease's deadline
  // after it (ms since the epoch; renewed when renew_ms > 0).
  Result<int64_t> Update(const PutRequest& req);
  // The same under a chosen request id, as PutOnce: repeated after a crash, it applies once.
  Result<int64_t> UpdateOnce(uint64_t rid, const PutRequest& req);
  // GetRequest::also names columns to hand out beside the task's, from the rows that have them.
  Result<GetReply> Get(const GetRequest& req);
  // The same get, its reply read in place (DecodeGetReplyView): for a consumer that reads values
  // where they lie instead of taking copies of them.
  Result<GetReplyView> GetView(const GetRequest& req);
  Result<IndexReply> Ack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices);
  Result<IndexReply> Nack(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices);
  // Gives back every lease `holder` holds for `task`: what a restarted consumer does with the
  // leases of the process it replaces (GetRequest::holder).
  Result<IndexReply> ReleaseHolder(const std::string& task, const std::string& holder);
  Result<std::optional<std::string>> MetaGet(const std::string& key);
  Status MetaSet(const MetaRequest& req);
  // optional: the task keeps no row alive (an audit, say): rows go once the others consumed them.
  Status Declare(const std::string& task, const std::vector<std::string>& columns, bool optional = false);
  // Removes the task for good; returns how many rows only it kept alive (freed now).
  Result<uint64_t> Retire(const std::string& task);
  Result<nlohmann::json> Stat();
  Status Ping();

  Client& wire() { return client_; }
  // The storage units' endpoints (empty: the server has none). Asks the server the first time.
  Result<std::vector<std::string>> Units();
  // The request a put sends: with units, its large values are first staged on them (the units
  // hold them durably on return) and the request refers to them; without, EncodePut(req). For a
  // pipeline of puts (QueuePipeline), which sends it itself.
  Result<Message> StagePut(const PutRequest& req);

 private:
  // Storage units (client_units.cc). A put's request, its large values staged on the units when
  // there are any, sent under `rid` when not null; staged again when the controller finds the
  // staging stale (kStaleStaging).
  Result<Message> CallPut(const PutRequest& req, const uint64_t* rid);
  // The reply with every reference replaced by the value fetched from its unit; nullopt when the
  // reply refers to none.
  Result<std::optional<Message>> ResolveRefs(const MessageView& reply);
  // After ResolveRefs failed with `why` on the `attempt`th get: OK when the get is to be asked
  // again, `why` otherwise. A reply may refer to a value its unit freed meanwhile (kFreedValue):
  // the controller stopped referring to it after it replied, as when the lease ran out and the
  // row was regenerated or consumed by the next holder. The reply's rows are then given back
  // (Nack; refused for a lease that ran out) and the get repeated, 3 times at most; the rows of
  // the last are given back too.
  Status RetryAfterFreed(const std::string& task, const MessageView& reply, const Status& why, int attempt);

  ClientOptions options_;
  Client client_;
  bool units_known_ = false;
  std::vector<std::string> unit_endpoints_;
  std::vector<std::unique_ptr<UnitClient>> units_;
  uint64_t spread_ = 0;  // the unit of the next new row's values
  size_t unit_min_bytes_ = kLendBytes;  // the controller's queue.unit_min_bytes
  std::shared_ptr<std::string> put_body_;  // PutColumn's buffer, used again once the socket let go
};

// A msgpack document as JSON (tensors and bytes as json_value.h writes them).
nlohmann::json MsgpackToJson(const msgpack::object& o);

// Gives back the leases an earlier process of `holder` left on `task` when it died, so the role
// restarted in its place takes those rows at once instead of after their lease: the feeder
// upstream counts leased rows as in flight and would hold back meanwhile. A task the queue does
// not know yet holds none. Logs and emits a "released" event (events may be null) when rows
// came back. REQUIRES: no live process holds leases under the same holder.
Status ReleaseEarlierLeases(QueueClient& client, const std::string& task, const std::string& holder, EventLog* events);

}  // namespace rl::queue
