// The bodies of rl-queue's requests and replies: encoders for clients, decoders for the server.
// The field names are the protocol (man/rl-protocol.7, "OPERATIONS").
// Thread safety: reentrant functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rl/core/status.h"
#include "rl/queue/record.h"
#include "rl/queue/store.h"
#include "rl/wire/envelope.h"

namespace rl::queue {

// A row as a client sends it: a new row when index is empty, else columns added to that row.
struct ClientRow {
  std::optional<uint64_t> index;
  std::vector<std::pair<std::string, Value>> columns;
};

struct PutRequest {
  std::vector<ClientRow> rows;
  std::string ack_task;  // also consume the rows for this task (atomically with the write)
  uint64_t ack_lease = 0;
};

struct IndexRequest {  // ack and nack
  std::string task;
  uint64_t lease = 0;
  std::vector<uint64_t> indices;
};

struct MetaRequest {
  std::string key, value;
  std::optional<std::string> if_equals;
};

struct DeclareRequest {
  std::string task;
  std::vector<std::string> columns;
};

// Client side: body + frames for each op.
Message EncodePut(const PutRequest& req);
Message EncodeGet(const GetRequest& req);
Message EncodeIndices(const IndexRequest& req);
Message EncodeMetaGet(const std::string& key);
Message EncodeMetaSet(const MetaRequest& req);
Message EncodeDeclare(const DeclareRequest& req);

// Server side.
Result<PutRequest> DecodePut(const Message& m);
Result<GetRequest> DecodeGet(const Message& m);
Result<IndexRequest> DecodeIndices(const Message& m);
Result<std::string> DecodeMetaGet(const Message& m);
Result<MetaRequest> DecodeMetaSet(const Message& m);
Result<DeclareRequest> DecodeDeclare(const Message& m);

// Reply bodies.
struct GotRow {
  uint64_t index = 0;
  std::vector<std::pair<std::string, Value>> columns;
};
struct GetReply {
  uint64_t lease = 0;
  int64_t deadline_ms = 0;
  std::vector<GotRow> rows;
  uint64_t dropped = 0, regenerated = 0;
};
struct IndexReply {
  std::vector<uint64_t> done;  // put: written; ack: acked; nack: released
  std::vector<uint64_t> rejected;
};

// Builds the reply to the request that `r` carried out (also for a retry of it).
Message ReplyFor(const Record& r, const Store& store);
Result<GetReply> DecodeGetReply(const Message& m);
Result<IndexReply> DecodeIndexReply(const Message& m);
Message EncodeStatReply(const Store& store, uint64_t log_bytes, uint64_t snapshot_bytes, const std::string& fsync);

}  // namespace rl::queue
