// DurableStore: a Store kept in a directory as snapshots plus write-ahead logs.
//
//   DIR/LOCK              flock(2)ed while a server owns DIR
//   DIR/snapshot-N.snap   the state before log N (absent until the first snapshot)
//   DIR/wal-N.log         records since that snapshot, then wal-(N+1).log, ...
//
// Commit() queues a record for the log and applies it, and returns the log position after it; the
// server Submit()s a turn's records to the log's writer thread, and sends the replies of records
// once written() (or, as the fsync policy says, synced()) has reached their positions. The writer
// adds to the eventfd notify_fd() whenever those advance.
// Snapshots are encoded on the owner's thread and written (with their fsync) on a thread of their
// own, while new records go to the next log; the logs before it are removed once it is durable.
// Open() loads the newest snapshot, replays the logs after it, and cuts a torn tail off the last.
// Thread safety: none; the server owns it on one thread (the threads above are internal).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

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
  // `direct_log`: the logs are written with O_DIRECT where possible (WalWriter::Open).
  static Result<std::unique_ptr<DurableStore>> Open(const std::string& dir, uint64_t snapshot_bytes,
                                                    RecoveryReport* report, bool direct_log = true);
  ~DurableStore();

  const Store& store() const { return store_; }
  // Queues r for the log and applies it; r.rows is left empty (the values move into the store).
  // The bytes of lent cells go to the log from where they lie. Returns the log position after r.
  uint64_t Commit(Record& r);
  // Store::TakeReleased: unit rows no row refers to any more (a controller's).
  std::vector<uint64_t> TakeReleased() { return store_.TakeReleased(); }
  void Submit() { wal_->Submit(); }
  void RequestSync() { wal_->Submit(), wal_->RequestSync(); }
  uint64_t appended() const { return wal_->appended(); }
  uint64_t written() const { return wal_->written(); }
  uint64_t synced() const { return wal_->synced(); }
  // The first error of the log writer or of a background snapshot.
  Status status() const;
  int notify_fd() const { return notify_fd_; }
  // Blocking: everything committed is written (Flush) or synced (Sync).
  Status Flush() { return wal_->Flush(); }
  Status Sync() { return wal_->Sync(); }
  bool has_unsynced() const { return wal_->has_unsynced(); }
  // Collects a finished background snapshot, and starts one once the current log passed the
  // threshold. `sync_log`: the log is synced before the next starts (the fsync policy syncs).
  Status MaybeSnapshot(bool sync_log);
  // A snapshot now, waiting until it is durable.
  Status Snapshot(bool sync_log);
  uint64_t log_bytes() const { return wal_->bytes(); }
  uint64_t snapshot_bytes() const { return snapshot_size_; }

 private:
  DurableStore(std::string dir, int lock_fd, int notify_fd, uint64_t threshold, bool direct_log)
      : dir_(std::move(dir)), lock_fd_(lock_fd), notify_fd_(notify_fd), threshold_(threshold),
        direct_log_(direct_log) {}
  Status Recover(RecoveryReport* report);
  Status StartSnapshot(bool sync_log);
  // Joins a background snapshot; with `wait`, also one that has not finished.
  Status ReapSnapshot(bool wait);
  // The background snapshot: writes snapshot-`next`, then removes the logs and snapshots before it.
  void WriteSnapshot(uint64_t next, WalPayload payload);
  std::string LogPath(uint64_t n) const;
  std::string SnapshotPath(uint64_t n) const;

  std::string dir_;
  int lock_fd_;
  int notify_fd_;
  uint64_t threshold_;
  bool direct_log_;
  Store store_;
  std::unique_ptr<WalWriter> wal_;
  uint64_t log_number_ = 1;
  uint64_t snapshot_size_ = 0;
  std::thread snapshot_thread_;
  std::atomic<bool> snapshot_done_{false};
  Status snapshot_status_;           // written by the snapshot thread before snapshot_done_
  uint64_t snapshot_file_bytes_ = 0;  // likewise
};

// The snapshot file: "RLQS" | u32 version (1) | u64 log number | u64 length | u32 CRC-32C | payload.
std::string EncodeSnapshotFile(uint64_t log_number, const std::string& payload);
Result<std::string> DecodeSnapshotFile(const std::string& bytes, uint64_t* log_number);

}  // namespace rl::queue
