// The write-ahead log: a file of records, each
//
//   u32 length (LE) | u32 CRC-32C of payload (LE) | payload (length bytes, a msgpack Record)
//
// A record is whole or it is the torn tail of a crash: ReadWal stops at the first record whose
// header runs past the end of the file, whose length is 0 or above kMaxWalRecord, or whose
// checksum fails, and reports where the good part ends so recovery can cut the rest.
//
// WalWriter writes with O_DIRECT where the filesystem allows it, on a thread of its own, so the
// server's loop goes on while a record is checksummed and written (whole 4 KiB blocks, the last
// one padded with zeros until the next write or a clean close; less than 256 KiB of records
// waits up to 2 ms for more unless a sync or Flush waits on it; records are copied into an 8 MiB
// aligned buffer and checksummed there). Through the page cache (asked for, or where O_DIRECT is
// refused) the owner writes at Submit: a copy, no hand-off. Either way fdatasyncs run on a
// syncer thread of their own, so records go on being written during a sync and the next sync
// takes all of them (group commit).
// Positions count bytes of log across the logs of a directory
// (a new log starts where the one before ended), so "written up to p" compares across logs.
// Thread safety: every method is for one owning thread; the writer thread is internal.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "rl/core/status.h"

namespace rl::queue {

constexpr uint32_t kMaxWalRecord = 1u << 30;
constexpr size_t kWalHeaderBytes = 8;

// A record's payload: bytes from malloc(3), freed by the writer once written. Or, when `pieces`
// is not empty, the payload is the pieces one after another: each lies in `data` or in memory
// that `holds` keep alive (the request frames whose values the record repeats), so large values
// reach the log without being copied into a buffer of their own first. `size` is the total.
struct WalPayload {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data;
  size_t size = 0;
  std::vector<std::string_view> pieces;
  std::vector<std::shared_ptr<const void>> holds;  // released on the writer thread once written
};

// The payload's bytes as pieces, in order (its data alone when it has no pieces).
std::vector<std::string_view> PayloadPieces(const WalPayload& p);

class WalWriter {
 public:
  // Opens `path` for appending, first cutting it to `keep_bytes` (the end of its good records).
  // `start` is the position of the log's first byte. After each batch written or synced the
  // writer thread adds 1 to the eventfd `notify_fd` (-1: none); it must outlive the writer.
  // `direct_io`: write with O_DIRECT where the filesystem allows it, on the writer thread. Else
  // (or where the filesystem refuses it at open) Submit writes through the page cache on the
  // owner's thread: a copy, so written() is there at once; the sync then writes the pages back,
  // and drops them from the cache.
  static Result<std::unique_ptr<WalWriter>> Open(const std::string& path, uint64_t keep_bytes, uint64_t start = 0,
                                                 int notify_fd = -1, bool direct_io = true);
  // Writes what was appended, then stops the thread.
  ~WalWriter();

  // Queues a record; returns the position just after it. Nothing is written before Submit.
  // REQUIRES: 0 < payload.size <= kMaxWalRecord.
  uint64_t Append(WalPayload payload);
  uint64_t Append(const std::string& payload);  // copies
  // Hands every record appended so far to the writer thread.
  void Submit();
  // Asks for an fdatasync(2) once every record submitted so far is written.
  void RequestSync();

  uint64_t appended() const { return appended_; }
  uint64_t written() const { return written_.load(std::memory_order_acquire); }  // write(2) done up to here
  uint64_t synced() const { return synced_.load(std::memory_order_acquire); }    // fdatasync done up to here
  // The first write or sync error; the writer stops at it and nothing after it is written.
  Status status() const;

  // Blocking forms: submit, then wait until everything is written (after this a kill -9 of the
  // process loses nothing appended) or also synced (an OS crash or power loss loses nothing).
  Status Flush();
  Status Sync();
  // Bytes of this log file, counting records appended and not yet written.
  uint64_t bytes() const { return appended_ - start_ + keep_; }
  bool has_unsynced() const { return synced() < appended_; }

 private:
  WalWriter(std::string path, int fd, uint64_t keep, uint64_t start, int notify_fd, bool direct,
            const std::string& tail);
  void Loop();
  void SyncLoop();
  void WriteInline();
  // Writer thread (or, without one, the owner) only, from here to the end of the class.
  Status WriteBatch(std::vector<WalPayload>& batch);
  Status WriteBuffered(std::vector<WalPayload>& batch, std::vector<uint32_t>& headers);
  Status WriteDirect(std::vector<WalPayload>& batch, std::vector<uint32_t>& headers, bool* refused);
  void StageChecksummed(const WalPayload& p, uint32_t* header);
  Status Stage(const char* p, size_t n, bool* refused);
  Status WriteWholeBlocks(bool* refused);
  void DropWholeBlocks();
  Status WriteStage(size_t len, bool* refused);
  Status WaitFor(const std::atomic<uint64_t>& pos, uint64_t target);
  void Notify();

  const std::string path_;
  const int fd_;
  const uint64_t keep_, start_;
  const int notify_fd_;
  uint64_t appended_;                  // owner only
  std::vector<WalPayload> appending_;  // owner only: appended, not yet submitted

  mutable std::mutex mu_;
  std::condition_variable wake_, sync_wake_, done_;
  std::vector<WalPayload> queue_;  // submitted, for the writer
  uint64_t submitted_;             // position after the last record in queue_ or written
  uint64_t sync_target_;           // sync once written up to here
  uint64_t write_target_ = 0;      // Flush waits for this: write without coalescing
  bool stop_ = false;
  bool writer_done_ = false;       // the writer thread has returned
  bool coalescing_ = false;        // the writer waits a little for more records
  Status error_;
  std::atomic<uint64_t> written_, synced_;

  bool direct_;                                    // fd_ is O_DIRECT; set under mu_
  uint64_t file_end_;                              // bytes of whole records in the file
  std::unique_ptr<char, WalPayload::Free> stage_;  // direct: aligned; its first bytes are the last block's
  size_t stage_len_ = 0;
  uint64_t stage_offset_ = 0;                      // file offset of stage_[0], block-aligned
  std::thread thread_, sync_thread_;               // last: started once the rest is set
};

struct WalScan {
  uint64_t records = 0;
  uint64_t good_bytes = 0;   // where the last whole record ends
  uint64_t file_bytes = 0;
  std::string tail_error;    // why reading stopped before file_bytes, empty when it did not
  // The tail is only the zeros a direct write pads its last block with (fewer than a block, all
  // zero, the file a whole number of blocks): a writer stopped before its clean close cut them.
  // Nothing was written there (a record's length is never 0), so nothing is lost.
  bool zero_padding = false;
};

// Calls on_record for each whole record in order. A non-OK status from on_record stops the scan
// and is returned. A torn or corrupt tail is not an error here: see scan->tail_error.
Status ReadWal(const std::string& path, const std::function<Status(const char*, size_t)>& on_record, WalScan* scan);
// The same over bytes in memory (the fuzz target's entry point).
Status ScanWalBytes(const std::string& bytes, const std::function<Status(const char*, size_t)>& on_record,
                    WalScan* scan);

}  // namespace rl::queue
