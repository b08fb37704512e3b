// Record: one state change of the queue. Every mutation is a Record: the server plans it against
// the current state, appends it to the write-ahead log, then applies it; recovery applies the
// logged Records again in order, so state after a restart is the state that was acknowledged.
// The msgpack form of a Record is the payload of a log record (man/rl-queue.1, "LOG FORMAT").
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rl/core/status.h"
#include "rl/queue/cell.h"
#include "rl/queue/wal.h"
#include "rl/wire/msgpack_io.h"
#include "rl/wire/value.h"

namespace rl::queue {

// Numbers are stored in logs: never renumber.
enum class RecordType : uint8_t {
  kPut = 1,      // new rows and/or columns added to rows; optional ack of `task`; or an update
  kLease = 2,    // rows handed out under a lease; rows dropped or regenerated on the way
  kAck = 3,      // rows consumed by `task`
  kRelease = 4,  // rows back to ready: a nack, or a lease that expired (sender empty)
  kMetaSet = 5,  // run metadata key := value
  kDeclare = 6,  // a task and the columns it needs
  kRetire = 7,   // a task removed: it holds no row any more
  kFree = 8,     // a storage unit's rows deleted (`indices`; `rejected`: those it did not have)
};

struct PutRow {
  uint64_t index = 0;
  bool is_new = false;
  std::vector<std::pair<std::string, Cell>> columns;
};

// A further lease made by the same request: the other parts of a token-balanced round, held
// (reserved) for the next consumers of the task.
struct ReservedLease {
  uint64_t lease = 0;
  std::vector<uint64_t> indices;
};

struct Record {
  RecordType type = RecordType::kPut;
  std::string sender;  // who asked; empty for the server's own records (lease expiry)
  uint64_t rid = 0;    // the request id, for exactly-once replies across restarts

  std::string task;              // kLease, kAck, kRelease, kDeclare, kRetire; kPut when it acks
  uint64_t lease = 0;            // kLease: the new lease; kAck/kRelease/kPut: the lease acked (0: any)
  int64_t deadline_ms = 0;       // kLease: wall-clock expiry; kPut update: the lease's after it
  std::vector<uint64_t> indices; // kLease/kAck/kRelease/kFree: the rows; kPut: the rows written
  std::vector<uint64_t> dropped;      // kLease: rows dropped for `task` (stale, uniform group)
  std::vector<uint64_t> regenerated;  // kLease: rows reset to their first columns
  // kLease: how many of `dropped` were in uniform groups (GetRequest::drop_uniform), and the sum
  // of that column's values over them (numbers only): the reward of groups dynamic sampling
  // dropped, so that a trainer can tell the mean reward of all it was sent.
  uint64_t uniform = 0;
  double uniform_sum = 0;
  std::vector<uint64_t> rejected;     // kAck/kRelease/kFree: rows refused (kept for the reply only)
  std::vector<ReservedLease> reserved;  // kLease: further parts of a balanced round
  bool takeover = false;          // kLease: the lease already exists (a reserved part claimed)
  std::string holder;             // kLease: who takes it (GetRequest::holder); "" when not named
  std::vector<std::string> also;  // kLease: columns handed out beside the task's (GetRequest::also)
  std::vector<PutRow> rows;       // kPut
  // kPut: an update of rows held by lease `update_lease` of this task: their columns are replaced
  // or added, they stay leased, and the lease's deadline becomes deadline_ms. Kept apart from
  // `task`, which a put acks: a server from before updates replays one as a put that adds the
  // columns a row lacks, never as an ack.
  std::string update_task;
  uint64_t update_lease = 0;
  std::vector<std::string> columns;  // kDeclare
  bool optional = false;          // kDeclare: the task does not keep rows alive (Store::MaybeFree)
  uint64_t freed = 0;             // kRetire: rows the retirement freed (kept for the reply only)
  std::string key, value;         // kMetaSet
  bool full = false;              // planning only, never stored: a get cannot take more rows
};

// The payload bytes of a log record (values inline, no frames).
std::string EncodeRecord(const Record& r);
// The same in a buffer sized for it up front (the log takes its bytes without a copy).
msgpack::sbuffer EncodeRecordBuffer(const Record& r);
// The same bytes as a log payload in which the bytes of lent cells (Cell) are pieces of their
// buffers, not copies; the payload keeps those buffers alive until it is written.
WalPayload EncodeRecordPayload(const Record& r);
Result<Record> DecodeRecord(const char* data, size_t size);

// Packs msgpack into one buffer, except the bytes of lent cells, which stay where they lie: the
// result is a payload of pieces (the packed parts and those bytes, in order) holding the cells'
// buffers. For a log record or a snapshot of large values, without copying them.
// The bytes packed are the same as with PackCell throughout.
class PiecePacker {
 public:
  // `reserve`: the bytes expected, lent bytes not counted (one allocation when it is enough).
  explicit PiecePacker(size_t reserve) : buf_(reserve), pk_(buf_) {}
  Packer& packer() { return pk_; }
  void Pack(const Cell& c);
  WalPayload Finish() &&;

 private:
  msgpack::sbuffer buf_;
  Packer pk_;
  std::vector<std::pair<size_t, std::string_view>> cuts_;  // lent bytes go after buf_[0, first)
  std::vector<std::shared_ptr<const void>> holds_;
  size_t lent_ = 0;
};

// Pieces shared with the snapshot writer.
void PackU64List(Packer& pk, const std::vector<uint64_t>& v);
void PackStringList(Packer& pk, const std::vector<std::string>& v);
Result<std::vector<std::pair<std::string, Cell>>> UnpackColumns(const msgpack::object& o);

}  // namespace rl::queue
