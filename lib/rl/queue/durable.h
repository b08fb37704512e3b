// DurableStore: a Store kept in a directory as snapshots plus write-ahead logs.
//
//   DIR/LOCK              flock(2)ed while a server owns DIR
//   DIR/snapshot-N.snap   the state before log N (absent until the first snapshot)
//   DIR/wal-N.log         records since that snapshot, then wal-(N+1).log, ...
//
// Commit() appends a record to the log buffer and applies it; the server calls Flush() and Sync()
// before it sends the replies of the records committed (the fsync policy says when to Sync).
// Open() loads the newest snapshot, replays the logs after it, and cuts a torn tail off the last.
// Thread safety: none; the server owns it on one thread.
#pragma once

#include <memory>
#include <string>

#include "rl/core/status.h"
#include "rl/queue/store.h"
#include "rl/queue/wal.h"

namespace rl::queue {

enum class FsyncPolicy { kAlways, kBatch, kNever };
Result<FsyncPolicy> ParseFsyncPolicy(const std::string& name);
const char* FsyncPolicyName(FsyncPolicy p);

struct RecoveryReport {
  bool had_snapshot = false;
  uint64_t snapshot_log = 0;
  uint64_t logs = 0, records = 0;
  uint64_t torn_bytes = 0;  // cut off the last log
  std::string torn_reason;
};

class DurableStore {
 public:
  static Result<std::unique_ptr<DurableStore>> Open(const std::string& dir, uint64_t snapshot_bytes,
                                                    RecoveryReport* report);
  ~DurableStore();

  const Store& store() const { return store_; }
  // Logs r and applies it; r.rows is left empty (the values move into the store).
  void Commit(Record& r);
  Status Flush() { return wal_->Flush(); }
  Status Sync() { return wal_->Sync(); }
  bool has_unsynced() const { return wal_->has_unsynced(); }
  // Writes a snapshot and starts a new log once the current log passed the threshold.
  Status MaybeSnapshot();
  Status Snapshot();
  uint64_t log_bytes() const { return wal_->bytes(); }
  uint64_t snapshot_bytes() const { return snapshot_size_; }

 private:
  DurableStore(std::string dir, int lock_fd, uint64_t threshold)
      : dir_(std::move(dir)), lock_fd_(lock_fd), threshold_(threshold) {}
  Status Recover(RecoveryReport* report);
  std::string LogPath(uint64_t n) const;
  std::string SnapshotPath(uint64_t n) const;

  std::string dir_;
  int lock_fd_;
  uint64_t threshold_;
  Store store_;
  std::unique_ptr<WalWriter> wal_;
  uint64_t log_number_ = 1;
  uint64_t snapshot_size_ = 0;
};

// The snapshot file: "RLQS" | u32 version (1) | u64 log number | u64 length | u32 CRC-32C | payload.
std::string EncodeSnapshotFile(uint64_t log_number, const std::string& payload);
Result<std::string> DecodeSnapshotFile(const std::string& bytes, uint64_t* log_number);

}  // namespace rl::queue
