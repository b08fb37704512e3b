// The bodies of rl-queue's requests and replies: encoders for clients, decoders for the server.
// The field names are the protocol (man/rl-protocol.7, "OPERATIONS").
// Thread safety: reentrant functions.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
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
  // An update (rl-protocol(7), put): every row names a live row that lease `update_lease` of this
  // task holds; its columns are written, replacing any the row has but those it was created with,
  // and the rows stay leased. No ack_task. A multi-turn rollout writes its progress this way.
  std::string update_task;
  uint64_t update_lease = 0;
  int64_t renew_ms = 0;  // > 0: the lease then ends renew_ms after the update
};

struct IndexRequest {  // ack and nack
  std::string task;
  uint64_t lease = 0;
  std::vector<uint64_t> indices;
  std::string holder;  // nack only: give back every lease of this holder (lease 0, no indices)
};

constexpr size_t kMaxHolderBytes = 256;

// rl-queue's own op beside the shared ones of rl/wire/envelope.h (as rl/weights adds its own).
constexpr Op kOpRetire = static_cast<Op>(10);

struct MetaRequest {
  std::string key, value;
  std::optional<std::string> if_equals;
};

struct DeclareRequest {
  std::string task;
  std::vector<std::string> columns;
  bool optional = false;  // the task does not keep rows alive (Store::MaybeFree)
};

// Client side: body + frames for each op.
Message EncodePut(const PutRequest& req);
// The same with references in place of values: refs[r][c], when set, is packed (PackUnitRef)
// instead of column c of row r (the value's type, dtype and shape go with it, its bytes do not).
Message EncodePutRefs(const PutRequest& req, const std::vector<std::vector<std::optional<UnitRef>>>& refs);
// A put of new rows made of some columns of req's rows, picked as (row, its columns), packed
// straight from req: what a client stages on a storage unit.
Message EncodePutPicks(const PutRequest& req, const std::vector<std::pair<size_t, std::vector<size_t>>>& picks);
// The body EncodePut makes for new rows of one bytes column each, packed straight from `values`
// (no Value is built, so the bytes are copied once, into the body).
std::string EncodePutColumn(std::string_view column, const std::vector<std::string>& values);
// The same into *body, replacing what it held (its capacity is kept: a buffer used again).
void EncodePutColumnInto(std::string* body, std::string_view column, const std::vector<std::string>& values);
Message EncodeGet(const GetRequest& req);
Message EncodeIndices(const IndexRequest& req);
Message EncodeMetaGet(const std::string& key);
Message EncodeMetaSet(const MetaRequest& req);
Message EncodeDeclare(const DeclareRequest& req);
Message EncodeRetire(const std::string& task);

// Server side: a request whose body is decoded where it lies, in the frame that carried it.
// *body must stay live while the Request is used.
struct Request {
  Header header;
  std::string_view body;
  std::vector<std::string> blobs;
  std::shared_ptr<const void> frame;  // when set, keeps body's bytes alive (the server's zmq frame)
};
// A put as the server takes it: rows for PlanPut, new rows not yet given their indices.
struct PutCommand {
  std::vector<PutRow> rows;
  std::string ack_task;
  uint64_t ack_lease = 0;
  std::string update_task;  // as in PutRequest
  uint64_t update_lease = 0;
  int64_t renew_ms = 0;
};
// With `hold` (keeping body's bytes alive), string, bytes and tensor values of at least kLendBytes
// that lie in body are lent by it (Cell) instead of copied; with null, every value is copied.
Result<PutCommand> DecodePutCommand(std::string_view body, const std::vector<std::string>& blobs,
                                    std::shared_ptr<const void> hold);
Result<PutRequest> DecodePut(std::string_view body, const std::vector<std::string>& blobs);
Result<GetRequest> DecodeGet(std::string_view body);
Result<IndexRequest> DecodeIndices(std::string_view body);
Result<std::string> DecodeMetaGet(std::string_view body);
Result<MetaRequest> DecodeMetaSet(std::string_view body);
Result<DeclareRequest> DecodeDeclare(std::string_view body);
Result<std::string> DecodeRetire(std::string_view body);  // the task
// The same from a whole Message.
inline Result<PutRequest> DecodePut(const Message& m) { return DecodePut(m.body, m.blobs); }
inline Result<GetRequest> DecodeGet(const Message& m) { return DecodeGet(m.body); }
inline Result<IndexRequest> DecodeIndices(const Message& m) { return DecodeIndices(m.body); }
inline Result<std::string> DecodeMetaGet(const Message& m) { return DecodeMetaGet(m.body); }
inline Result<MetaRequest> DecodeMetaSet(const Message& m) { return DecodeMetaSet(m.body); }
inline Result<DeclareRequest> DecodeDeclare(const Message& m) { return DecodeDeclare(m.body); }
inline Result<std::string> DecodeRetire(const Message& m) { return DecodeRetire(m.body); }

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
  uint64_t uniform = 0;     // of `dropped`: rows of uniform groups (drop_uniform)
  double uniform_sum = 0;   // the sum of the drop_uniform column over those rows (numbers only)
};
struct IndexReply {
  std::vector<uint64_t> done;  // put: written; ack: acked; nack: released
  std::vector<uint64_t> rejected;
  int64_t deadline_ms = 0;  // an update put: when its lease ends now; else 0
  int64_t staged_ms = 0;    // a storage unit's put: when the unit staged the rows (its clock)
};

// A reply's body and blob frames as the server builds them: the body's buffer goes to the socket
// as it is (a get's rows are copied once, into it).
struct ReplyBody {
  msgpack::sbuffer body{256};
  std::vector<std::string> blobs;
};

// A get reply read where it lies: each row's columns stay a msgpack map in the reply's body
// (no value is copied out; a tensor sent in a frame stays an ext object naming its frame, one of
// `blobs`).
struct GetReplyView {
  struct Row {
    uint64_t index = 0;
    const msgpack::object* columns = nullptr;  // a map, "index" included; points into the body
  };
  std::shared_ptr<const void> hold;  // keeps the body and blobs alive
  std::vector<std::string_view> blobs;
  msgpack::object_handle doc;
  uint64_t lease = 0;
  int64_t deadline_ms = 0;
  uint64_t dropped = 0, regenerated = 0;
  uint64_t uniform = 0;    // as GetReply's
  double uniform_sum = 0;
  std::vector<Row> rows;
};

// A storage unit's reply to a read: a get reply's rows alone (DecodeGetReply reads it).
ReplyBody ReadReplyFor(const RowsView& view);
// Builds the reply to the request that `r` carried out (also for a retry of it).
ReplyBody ReplyFor(const Record& r, const Store& store);
Result<GetReply> DecodeGetReply(const Message& m);
Result<GetReplyView> DecodeGetReplyView(MessageView m);
Result<GetReplyView> DecodeGetReplyView(Message m);
Result<IndexReply> DecodeIndexReply(const Message& m);
// units: a controller's storage units (its reply has "units" only when there are some).
ReplyBody EncodeStatReply(const Store& store, uint64_t log_bytes, uint64_t snapshot_bytes, const std::string& fsync,
                          const std::vector<std::string>& units = {});

}  // namespace rl::queue
