#include "rl/queue/wal.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

#include "rl/core/crc32c.h"
#include "rl/core/fs.h"
#include "rl/core/log.h"

namespace rl::queue {

namespace {

// Direct I/O: writes of whole aligned blocks from an aligned buffer, past the page cache.
constexpr size_t kDirectBlock = 4096;
constexpr size_t kStageBytes = 8u << 20;  // above a 64 x 64 KiB put: such a record is copied in one go
// A record copied into the stage is checksummed there, a chunk at a time while it is in cache.
constexpr size_t kChecksumChunk = 64u << 10;
// Records under this many bytes wait up to kCoalesceWait for more before a direct write.
constexpr uint64_t kCoalesceBytes = 256u << 10;
constexpr auto kCoalesceWait = std::chrono::milliseconds(2);

size_t RoundUp(size_t n, size_t block) { return (n + block - 1) / block * block; }

// Calls f(data, size) on each contiguous part of the payload, in order.
template <typename F>
void ForEachPiece(const WalPayload& p, F&& f) {
  if (p.pieces.empty()) return f(static_cast<const char*>(p.data.get()), p.size);
  for (std::string_view piece : p.pieces) f(piece.data(), piece.size());
}

}  // namespace

std::vector<std::string_view> PayloadPieces(const WalPayload& p) {
  if (p.pieces.empty()) return {std::string_view(p.data.get(), p.size)};
  return p.pieces;
}

namespace {

uint32_t PayloadCrc(const WalPayload& p) {
  uint32_t crc = 0;
  ForEachPiece(p, [&](const char* d, size_t n) { crc = Crc32c(d, n, crc); });
  return crc;
}

}  // namespace

Result<std::unique_ptr<WalWriter>> WalWriter::Open(const std::string& path, uint64_t keep_bytes, uint64_t start,
                                                   int notify_fd, bool direct_io) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(ErrnoMessage("open", path));
  struct stat st;
  std::string tail(keep_bytes % kDirectBlock, '\0');  // the last block's bytes, rewritten by the next write
  bool ok = ::fstat(fd, &st) == 0 &&
            (static_cast<uint64_t>(st.st_size) == keep_bytes || ::ftruncate(fd, static_cast<off_t>(keep_bytes)) == 0) &&
            (tail.empty() || ::pread(fd, tail.data(), tail.size(), static_cast<off_t>(keep_bytes - tail.size())) ==
                                 static_cast<ssize_t>(tail.size()));
  if (!ok) {
    Status s = Status::IOError(ErrnoMessage("truncate", path));
    ::close(fd);
    return s;
  }
  // The log is read back only at recovery: direct I/O spares copying it into the page cache.
  // Where the filesystem refuses O_DIRECT, or the caller asks, writes go through the page cache.
  int direct = direct_io ? ::open(path.c_str(), O_WRONLY | O_DIRECT | O_CLOEXEC) : -1;
  if (direct >= 0) {
    ::close(fd);
    fd = direct;
  }
  return std::unique_ptr<WalWriter>(new WalWriter(path, fd, keep_bytes, start, notify_fd, direct >= 0, tail));
}

WalWriter::WalWriter(std::string path, int fd, uint64_t keep, uint64_t start, int notify_fd, bool direct,
                     const std::string& tail)
    : path_(std::move(path)), fd_(fd), keep_(keep), start_(start), notify_fd_(notify_fd), appended_(start),
      submitted_(start), sync_target_(start), written_(start), synced_(start), direct_(direct), file_end_(keep) {
  if (direct_) {
    void* stage = nullptr;
    if (::posix_memalign(&stage, kDirectBlock, kStageBytes) != 0) throw std::bad_alloc();
    stage_.reset(static_cast<char*>(stage));
    std::memcpy(stage_.get(), tail.data(), tail.size());
    stage_len_ = tail.size();
    stage_offset_ = keep - tail.size();
  }
  if (direct_) {
    thread_ = std::thread([this] { Loop(); });
  } else {
    writer_done_ = true;  // the owner writes (WriteInline)
  }
  sync_thread_ = std::thread([this] { SyncLoop(); });
}

WalWriter::~WalWriter() {
  Submit();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
  sync_wake_.notify_one();
  sync_thread_.join();
  // Direct writes pad the last block with zeros; a clean close leaves the log without them.
  if (direct_ && ::ftruncate(fd_, static_cast<off_t>(file_end_)) != 0) {
    spdlog::warn("{}", ErrnoMessage("truncate", path_));
  }
  ::close(fd_);
}

uint64_t WalWriter::Append(WalPayload payload) {
  appended_ += kWalHeaderBytes + payload.size;
  appending_.push_back(std::move(payload));
  return appended_;
}

uint64_t WalWriter::Append(const std::string& payload) {
  WalPayload p;
  p.data.reset(static_cast<char*>(std::malloc(payload.size())));
  if (!p.data) throw std::bad_alloc();
  std::memcpy(p.data.get(), payload.data(), payload.size());
  p.size = payload.size();
  return Append(std::move(p));
}

// A writer waiting a little for more small records is not woken for each one that comes, only
// once they are enough to write.
void WalWriter::Submit() {
  if (appending_.empty()) return;
  if (!thread_.joinable()) return WriteInline();
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& p : appending_) queue_.push_back(std::move(p));
    submitted_ = appended_;
    wake = !coalescing_ || submitted_ - written_.load() >= kCoalesceBytes;
  }
  appending_.clear();
  if (wake) wake_.notify_one();
}

void WalWriter::RequestSync() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (sync_target_ >= submitted_) return;
    sync_target_ = submitted_;
  }
  wake_.notify_one();  // the writer stops waiting for more records
  sync_wake_.notify_one();
}

Status WalWriter::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

Status WalWriter::WaitFor(const std::atomic<uint64_t>& pos, uint64_t target) {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return !error_.ok() || pos.load() >= target; });
  return error_;
}

Status WalWriter::Flush() {
  Submit();
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_target_ = appended_;
  }
  wake_.notify_one();
  return WaitFor(written_, appended_);
}

Status WalWriter::Sync() {
  Submit();
  RequestSync();
  return WaitFor(synced_, appended_);
}

void WalWriter::Notify() {
  if (notify_fd_ < 0) return;
  uint64_t one = 1;
  ssize_t n = ::write(notify_fd_, &one, sizeof(one));
  (void)n;  // a full counter still wakes the reader
}

// Through the page cache a write is a copy: the owner makes it at once, with no hand-off to a
// thread and back, and a reply that waits only for the write goes out in the same turn.
void WalWriter::WriteInline() {
  Status s = status();
  if (s.ok()) s = WriteBatch(appending_);
  appending_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_ = appended_;
    if (s.ok()) written_.store(appended_, std::memory_order_release);
    if (!s.ok() && error_.ok()) error_ = s;
  }
  sync_wake_.notify_one();
  done_.notify_all();
}

// The writer thread: takes what was submitted and writes it with as few writev(2)s as it can;
// stops at the first error (its own or the syncer's), which the owner sees through status().
// It does not wait for fdatasyncs: the syncer thread runs them beside it, so records that come
// during a sync are written meanwhile and go into the next one (group commit).
void WalWriter::Loop() {
  std::vector<WalPayload> batch;
  while (true) {
    uint64_t end;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !queue_.empty() || !error_.ok(); });
      // Each direct write is a request to the device: small records wait a little for more,
      // unless someone waits on them (a sync, a Flush) or the writer is stopping.
      auto urgent = [&] {
        return stop_ || !direct_ || sync_target_ > written_.load() || write_target_ > written_.load() ||
               submitted_ - written_.load() >= kCoalesceBytes;
      };
      if (!urgent()) {
        coalescing_ = true;
        wake_.wait_for(lock, kCoalesceWait, urgent);
        coalescing_ = false;
      }
      if (!error_.ok() || queue_.empty()) {  // an error, or stop_ with nothing left
        writer_done_ = true;
        sync_wake_.notify_one();
        return;
      }
      batch.swap(queue_);
      end = submitted_;
    }
    Status s = WriteBatch(batch);
    batch.clear();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.ok()) written_.store(end, std::memory_order_release);
      if (!s.ok() && error_.ok()) error_ = s;
    }
    sync_wake_.notify_one();
    done_.notify_all();
    Notify();
  }
}

// The syncer thread: fdatasyncs what is written whenever a sync was asked for and something
// written is not yet synced; the sync covers every record written before it started.
void WalWriter::SyncLoop() {
  while (true) {
    uint64_t end;
    bool buffered;
    {
      std::unique_lock<std::mutex> lock(mu_);
      auto due = [&] { return sync_target_ > synced_.load() && written_.load() > synced_.load(); };
      bool stopped = false;  // stopping, and nothing more will be written
      sync_wake_.wait(lock, [&] { return due() || (stopped = stop_ && writer_done_) || !error_.ok(); });
      if (!error_.ok() || (!due() && stopped)) return;
      end = written_.load();
      buffered = !direct_;
    }
    Status s;
    if (::fdatasync(fd_) != 0) s = Status::IOError(ErrnoMessage("fdatasync", path_));
    // Through the page cache, the log's synced pages are dropped: it is read only at recovery.
    uint64_t from = synced_.load() - start_ + keep_, to = end - start_ + keep_;
    from -= from % kDirectBlock;  // whole pages only; the last partial one stays
    to -= to % kDirectBlock;
    if (s.ok() && buffered && to > from) {
      ::posix_fadvise(fd_, static_cast<off_t>(from), static_cast<off_t>(to - from), POSIX_FADV_DONTNEED);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (s.ok()) synced_.store(end, std::memory_order_release);
      if (!s.ok() && error_.ok()) error_ = s;
    }
    if (!s.ok()) wake_.notify_one();  // the writer stops too
    done_.notify_all();
    Notify();
  }
}

Status WalWriter::WriteBatch(std::vector<WalPayload>& batch) {
  if (batch.empty()) return Status::OK();
  std::vector<uint32_t> headers(2 * batch.size());  // length, CRC; WriteDirect sums as it copies
  uint64_t total = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    headers[2 * i] = static_cast<uint32_t>(batch[i].size);
    total += kWalHeaderBytes + batch[i].size;
  }
  auto checksum = [&] {
    for (size_t i = 0; i < batch.size(); ++i) headers[2 * i + 1] = PayloadCrc(batch[i]);
  };
  bool refused = false;
  Status s;
  if (direct_) {
    s = WriteDirect(batch, headers, &refused);
  } else {
    checksum();
    s = WriteBuffered(batch, headers);
  }
  if (refused) {  // the device wants another alignment
    spdlog::info("{}: direct I/O refused, writing through the page cache", path_);
    {
      std::lock_guard<std::mutex> lock(mu_);  // the syncer reads it
      direct_ = false;
    }
    int flags = ::fcntl(fd_, F_GETFL);
    if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_DIRECT) != 0) return Status::IOError(ErrnoMessage("fcntl", path_));
    checksum();
    s = WriteBuffered(batch, headers);
  }
  if (s.ok()) file_end_ += total;
  return s;
}

// pwritev(2)s the records' headers and payloads at the log's end, IOV_MAX pieces at a time,
// resuming after short writes.
Status WalWriter::WriteBuffered(std::vector<WalPayload>& batch, std::vector<uint32_t>& headers) {
  std::vector<struct iovec> pieces;
  pieces.reserve(2 * batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    pieces.push_back({&headers[2 * i], kWalHeaderBytes});
    ForEachPiece(batch[i], [&](const char* d, size_t n) {
      if (n > 0) pieces.push_back({const_cast<char*>(d), n});
    });
  }
  uint64_t offset = file_end_;
  size_t next = 0;
  while (next < pieces.size()) {
    int n = static_cast<int>(std::min<size_t>(IOV_MAX, pieces.size() - next));
    ssize_t written = ::pwritev(fd_, &pieces[next], n, static_cast<off_t>(offset));
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) return Status::IOError(ErrnoMessage("write", path_));
    offset += static_cast<uint64_t>(written);
    size_t left = static_cast<size_t>(written);
    while (left > 0 && left >= pieces[next].iov_len) left -= pieces[next++].iov_len;
    if (left > 0) {
      pieces[next].iov_base = static_cast<char*>(pieces[next].iov_base) + left;
      pieces[next].iov_len -= left;
    }
  }
  return Status::OK();
}

// Copies the records into the aligned stage and writes it in whole blocks; the last partial
// block is written padded with zeros (a torn tail by the log's own rule, so a crash right after
// leaves a log that recovery cuts cleanly) and kept, to be written again with what follows it.
// A record that fits in the stage is checksummed from the stage as it is copied (its bytes are
// read from memory once, not twice); a larger one is checksummed first, then copied through.
// Fills in each record's CRC in `headers`.
Status WalWriter::WriteDirect(std::vector<WalPayload>& batch, std::vector<uint32_t>& headers, bool* refused) {
  uint64_t start_offset = stage_offset_;
  std::string start_tail(stage_.get(), stage_len_);
  Status s;
  for (size_t i = 0; i < batch.size() && s.ok(); ++i) {
    size_t need = kWalHeaderBytes + batch[i].size;
    if (need > kStageBytes - stage_len_ && stage_len_ >= kDirectBlock) s = WriteWholeBlocks(refused);
    if (!s.ok()) break;
    if (need <= kStageBytes - stage_len_) {
      StageChecksummed(batch[i], &headers[2 * i]);
      continue;
    }
    headers[2 * i + 1] = PayloadCrc(batch[i]);
    s = Stage(reinterpret_cast<const char*>(&headers[2 * i]), kWalHeaderBytes, refused);
    ForEachPiece(batch[i], [&](const char* d, size_t n) {
      if (s.ok()) s = Stage(d, n, refused);
    });
  }
  if (s.ok() && stage_len_ > 0) {
    size_t padded = RoundUp(stage_len_, kDirectBlock);
    std::memset(stage_.get() + stage_len_, 0, padded - stage_len_);
    s = WriteStage(padded, refused);
    if (s.ok()) DropWholeBlocks();
  }
  if (!s.ok()) {  // as it was before the batch, for a retry through the page cache
    stage_offset_ = start_offset;
    std::memcpy(stage_.get(), start_tail.data(), start_tail.size());
    stage_len_ = start_tail.size();
  }
  return s;
}

// The payload is summed where it lies in the stage, kChecksumChunk at a time once copied, however
// small its pieces (a put of 1 KiB values is a hundred of them).
// REQUIRES: the record and its header fit in the stage after stage_len_.
void WalWriter::StageChecksummed(const WalPayload& p, uint32_t* header) {
  size_t at = stage_len_;
  stage_len_ += kWalHeaderBytes;
  size_t summed = stage_len_;
  uint32_t crc = 0;
  auto sum = [&](size_t upto) {
    crc = Crc32c(stage_.get() + summed, upto - summed, crc);
    summed = upto;
  };
  ForEachPiece(p, [&](const char* d, size_t n) {
    while (n > 0) {
      size_t take = std::min(n, kChecksumChunk);
      std::memcpy(stage_.get() + stage_len_, d, take);
      stage_len_ += take;
      d += take;
      n -= take;
      if (stage_len_ - summed >= kChecksumChunk) sum(stage_len_);
    }
  });
  sum(stage_len_);
  header[1] = crc;
  std::memcpy(stage_.get() + at, header, kWalHeaderBytes);
}

// Copies n bytes into the stage, writing it out each time it is full.
Status WalWriter::Stage(const char* p, size_t n, bool* refused) {
  while (n > 0) {
    size_t take = std::min(n, kStageBytes - stage_len_);
    std::memcpy(stage_.get() + stage_len_, p, take);
    stage_len_ += take;
    p += take;
    n -= take;
    if (stage_len_ == kStageBytes) {
      RL_RETURN_IF_ERROR(WriteStage(kStageBytes, refused));
      stage_offset_ += kStageBytes;
      stage_len_ = 0;
    }
  }
  return Status::OK();
}

// Writes the stage's whole blocks and keeps the partial one (at the front).
Status WalWriter::WriteWholeBlocks(bool* refused) {
  size_t whole = stage_len_ / kDirectBlock * kDirectBlock;
  RL_RETURN_IF_ERROR(WriteStage(whole, refused));
  DropWholeBlocks();
  return Status::OK();
}

// Moves the partial last block to the front of the stage, past the whole blocks before it.
void WalWriter::DropWholeBlocks() {
  size_t whole = stage_len_ / kDirectBlock * kDirectBlock;
  if (whole == 0) return;
  std::memmove(stage_.get(), stage_.get() + whole, stage_len_ - whole);
  stage_offset_ += whole;
  stage_len_ -= whole;
}

// Writes the first `len` bytes of the stage (a whole number of blocks) at stage_offset_.
// *refused: the write failed with EINVAL before writing anything (direct I/O not possible).
Status WalWriter::WriteStage(size_t len, bool* refused) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = ::pwrite(fd_, stage_.get() + done, len - done, static_cast<off_t>(stage_offset_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EINVAL && done == 0) {
      *refused = true;
      return Status::IOError(ErrnoMessage("direct write", path_));
    }
    if (n < 0) return Status::IOError(ErrnoMessage("write", path_));
    done += static_cast<size_t>(n);
    if (done % kDirectBlock != 0 && done < len) return Status::IOError("short direct write to " + path_);
  }
  return Status::OK();
}

Status ScanWalBytes(const std::string& bytes, const std::function<Status(const char*, size_t)>& on_record,
                    WalScan* scan) {
  *scan = WalScan();
  scan->file_bytes = bytes.size();
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes.size() - pos < kWalHeaderBytes) {
      scan->tail_error = "a record header is cut short";
      break;
    }
    uint32_t header[2];
    std::memcpy(header, bytes.data() + pos, sizeof(header));
    uint32_t length = header[0];
    if (length == 0 || length > kMaxWalRecord) {
      scan->tail_error = "a record has length " + std::to_string(length);
      break;
    }
    if (bytes.size() - pos - kWalHeaderBytes < length) {
      scan->tail_error = "a record is cut short";
      break;
    }
    const char* payload = bytes.data() + pos + kWalHeaderBytes;
    if (Crc32c(payload, length) != header[1]) {
      scan->tail_error = "a record fails its checksum";
      break;
    }
    RL_RETURN_IF_ERROR(on_record(payload, length));
    pos += kWalHeaderBytes + length;
    scan->records++;
    scan->good_bytes = pos;
  }
  const size_t tail = bytes.size() - scan->good_bytes;
  scan->zero_padding = tail > 0 && tail < kDirectBlock && bytes.size() % kDirectBlock == 0 &&
                       std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(scan->good_bytes), bytes.end(),
                                   [](char c) { return c == 0; });
  return Status::OK();
}

Status ReadWal(const std::string& path, const std::function<Status(const char*, size_t)>& on_record, WalScan* scan) {
  RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ScanWalBytes(bytes, on_record, scan);
}

}  // namespace rl::queue
