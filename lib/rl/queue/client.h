// QueueClient: typed calls to an rl-queue server over the retrying wire Client. Every call that
// changes state is sent with one request id and retried with it, so it takes effect once even
// when replies are lost or the server restarts in between.
// Thread safety: one QueueClient per thread.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rl/core/event_log.h"
#include "rl/queue/protocol.h"
#include "rl/wire/client.h"

namespace rl::queue {

class QueueClient {
 public:
  explicit QueueClient(ClientOptions options) : client_(std::move(options)) {}

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

 private:
  Client client_;
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
