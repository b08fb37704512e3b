// The write-ahead log: a file of records, each
//
//   u32 length (LE) | u32 CRC-32C of payload (LE) | payload (length bytes, a msgpack Record)
//
// A record is whole or it is the torn tail of a crash: ReadWal stops at the first record whose
// header runs past the end of the file, whose length is 0 or above kMaxWalRecord, or whose
// checksum fails, and reports where the good part ends so recovery can cut the rest.
// Thread safety: none; one writer per file.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::queue {

constexpr uint32_t kMaxWalRecord = 1u << 30;
constexpr size_t kWalHeaderBytes = 8;

class WalWriter {
 public:
  // Opens `path` for appending, first cutting it to `keep_bytes` (the end of its good records).
  static Result<std::unique_ptr<WalWriter>> Open(const std::string& path, uint64_t keep_bytes);
  ~WalWriter();

  // Frames `payload` into the write buffer.
  void Append(std::string payload);
  // write(2)s the buffer: after this a kill -9 of the process loses nothing appended.
  Status Flush();
  // fdatasync(2): after this an OS crash or power loss loses nothing flushed.
  Status Sync();
  uint64_t bytes() const { return file_bytes_ + pending_bytes_; }
  bool has_unsynced() const { return unsynced_ || pending_bytes_ > 0; }

 private:
  WalWriter(std::string path, int fd, uint64_t bytes) : path_(std::move(path)), fd_(fd), file_bytes_(bytes) {}
  std::string path_;
  int fd_;
  uint64_t file_bytes_;
  std::vector<std::string> pending_;  // record headers and payloads, written by one writev
  size_t pending_bytes_ = 0;
  bool unsynced_ = false;
};

struct WalScan {
  uint64_t records = 0;
  uint64_t good_bytes = 0;   // where the last whole record ends
  uint64_t file_bytes = 0;
  std::string tail_error;    // why reading stopped before file_bytes, empty when it did not
};

// Calls on_record for each whole record in order. A non-OK status from on_record stops the scan
// and is returned. A torn or corrupt tail is not an error here: see scan->tail_error.
Status ReadWal(const std::string& path, const std::function<Status(const char*, size_t)>& on_record, WalScan* scan);
// The same over bytes in memory (the fuzz target's entry point).
Status ScanWalBytes(const std::string& bytes, const std::function<Status(const char*, size_t)>& on_record,
                    WalScan* scan);

}  // namespace rl::queue
