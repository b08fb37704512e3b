// UnitClient: typed calls to one rl-queue storage unit (rl-queue unit) over the retrying wire
// Client: stage rows, read them, free them, list those staged long ago. QueueClient uses it to
// put and get the data of a queue whose controller has units; the controller's janitor to free.
// Thread safety: one UnitClient per thread.
#pragma once

#include <vector>

#include "rl/queue/protocol.h"
#include "rl/queue/unit_protocol.h"
#include "rl/wire/client.h"

namespace rl::queue {

class UnitClient {
 public:
  explicit UnitClient(ClientOptions options) : client_(std::move(options)) {}

  // Stages new rows (no index, no ack, no update); the reply names their unit rows in order and
  // says when the unit staged them (staged_ms, by its clock).
  Result<IndexReply> Stage(const PutRequest& req);
  // The same for a put already encoded (EncodePutPicks) of `rows` rows.
  Result<IndexReply> Stage(Message put, size_t rows);
  // The named columns of rows; a row the unit does not hold is left out of the reply.
  Result<GetReply> Read(const ReadRequest& req);
  // Deletes rows; the reply's rejected are those it did not hold.
  Result<IndexReply> Free(const std::vector<uint64_t>& indices);
  Result<ListReply> List(const ListRequest& req);

  Client& wire() { return client_; }

 private:
  Client client_;
};

}  // namespace rl::queue
