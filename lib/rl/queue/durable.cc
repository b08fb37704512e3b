#include "rl/queue/durable.h"

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <filesystem>
#include <vector>

#include "rl/core/crc32c.h"
#include "rl/core/fs.h"
#include "rl/core/log.h"

namespace rl::queue {
namespace fs = std::filesystem;

namespace {
constexpr char kSnapMagic[] = "RLQS";
constexpr size_t kSnapHeader = 4 + 4 + 8 + 8 + 4;

}  // namespace

Result<FsyncPolicy> ParseFsyncPolicy(const std::string& name) {
  if (name == "always") return FsyncPolicy::kAlways;
  if (name == "batch") return FsyncPolicy::kBatch;
  if (name == "never") return FsyncPolicy::kNever;
  return Status::InvalidArgument("fsync policy must be always, batch or never, not '" + name + "'");
}

const char* FsyncPolicyName(FsyncPolicy p) {
  switch (p) {
    case FsyncPolicy::kAlways: return "always";
    case FsyncPolicy::kBatch: return "batch";
    case FsyncPolicy::kNever: return "never";
  }
  return "?";
}

namespace {

// The snapshot file's header, before the payload `pieces`.
std::string SnapshotHeader(uint64_t log_number, const std::vector<std::string_view>& pieces) {
  std::string out(kSnapMagic, 4);
  uint32_t version = 1;
  uint64_t length = 0;
  uint32_t crc = 0;
  for (std::string_view p : pieces) {
    crc = Crc32c(p.data(), p.size(), crc);
    length += p.size();
  }
  out.append(reinterpret_cast<const char*>(&version), 4);
  out.append(reinterpret_cast<const char*>(&log_number), 8);
  out.append(reinterpret_cast<const char*>(&length), 8);
  out.append(reinterpret_cast<const char*>(&crc), 4);
  return out;
}

constexpr size_t kDirectBlock = 4096;
constexpr size_t kStageBytes = 1u << 20;

// Writes `pieces` to a new file `path` with O_DIRECT, a megabyte at a time through an aligned
// buffer (a snapshot is written once and read only at recovery: the page cache would only cost a
// copy), or plainly where the filesystem refuses direct I/O; then cuts the last block's padding
// and fsyncs. REQUIRES: path does not exist or may be replaced.
Status WriteFileDirect(const std::string& path, const std::vector<std::string_view>& pieces) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_DIRECT, 0644);
  bool direct = fd >= 0;
  if (!direct) fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(ErrnoMessage("open", path));
  void* raw = nullptr;
  if (::posix_memalign(&raw, kDirectBlock, kStageBytes) != 0) {
    ::close(fd);
    return Status::IOError("out of memory for " + path);
  }
  std::unique_ptr<char, decltype(&std::free)> stage(static_cast<char*>(raw), &std::free);
  uint64_t offset = 0, total = 0;
  size_t fill = 0;
  auto flush = [&](size_t len) -> Status {
    for (size_t done = 0; done < len;) {
      ssize_t n = ::pwrite(fd, stage.get() + done, len - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EINVAL && direct && offset == 0 && done == 0) {  // another alignment: plain writes
        int flags = ::fcntl(fd, F_GETFL);
        if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) return Status::IOError(ErrnoMessage("fcntl", path));
        direct = false;
        continue;
      }
      if (n < 0) return Status::IOError(ErrnoMessage("write", path));
      done += static_cast<size_t>(n);
    }
    return Status::OK();
  };
  Status s;
  for (std::string_view piece : pieces) {
    total += piece.size();
    while (!piece.empty() && s.ok()) {
      size_t take = std::min(piece.size(), kStageBytes - fill);
      std::memcpy(stage.get() + fill, piece.data(), take);
      piece.remove_prefix(take);
      fill += take;
      if (fill == kStageBytes) {
        s = flush(fill);
        offset += fill;
        fill = 0;
      }
    }
  }
  if (s.ok() && fill > 0) {
    size_t padded = (fill + kDirectBlock - 1) / kDirectBlock * kDirectBlock;
    std::memset(stage.get() + fill, 0, padded - fill);
    s = flush(padded);
  }
  if (s.ok() && ::ftruncate(fd, static_cast<off_t>(total)) != 0) s = Status::IOError(ErrnoMessage("truncate", path));
  if (s.ok() && ::fsync(fd) != 0) s = Status::IOError(ErrnoMessage("fsync", path));
  ::close(fd);
  return s;
}

}  // namespace

std::string EncodeSnapshotFile(uint64_t log_number, const std::string& payload) {
  return SnapshotHeader(log_number, {payload}) + payload;
}

Result<std::string> DecodeSnapshotFile(const std::string& bytes, uint64_t* log_number) {
  if (bytes.size() < kSnapHeader || bytes.compare(0, 4, kSnapMagic) != 0) {
    return Status::Corruption("not a snapshot file");
  }
  uint32_t version, crc;
  uint64_t length;
  std::memcpy(&version, bytes.data() + 4, 4);
  std::memcpy(log_number, bytes.data() + 8, 8);
  std::memcpy(&length, bytes.data() + 16, 8);
  std::memcpy(&crc, bytes.data() + 24, 4);
  if (version != 1) return Status::Corruption("snapshot version " + std::to_string(version));
  if (length != bytes.size() - kSnapHeader) return Status::Corruption("snapshot length does not match the file");
  std::string payload = bytes.substr(kSnapHeader);
  if (Crc32c(payload.data(), payload.size()) != crc) return Status::Corruption("snapshot fails its checksum");
  return payload;
}

std::string DurableStore::LogPath(uint64_t n) const { return dir_ + "/wal-" + std::to_string(n) + ".log"; }
std::string DurableStore::SnapshotPath(uint64_t n) const { return dir_ + "/snapshot-" + std::to_string(n) + ".snap"; }

Result<std::unique_ptr<DurableStore>> DurableStore::Open(const std::string& dir, uint64_t snapshot_bytes,
                                                         RecoveryReport* report, bool direct_log) {
  RL_RETURN_IF_ERROR(MakeDirs(dir));
  std::string lock = dir + "/LOCK";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(ErrnoMessage("open", lock));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Status::Unavailable("another rl-queue server holds " + lock);
  }
  int notify = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (notify < 0) {
    ::close(fd);
    return Status::IOError(ErrnoMessage("eventfd", dir));
  }
  std::unique_ptr<DurableStore> ds(new DurableStore(dir, fd, notify, snapshot_bytes, direct_log));
  *report = RecoveryReport();
  RL_RETURN_IF_ERROR(ds->Recover(report));
  return ds;
}

DurableStore::~DurableStore() {
  Status s = ReapSnapshot(true);
  if (!s.ok()) spdlog::warn("{}", s.ToString());
  wal_.reset();
  ::close(notify_fd_);
  ::close(lock_fd_);
}

Status DurableStore::Recover(RecoveryReport* report) {
  std::vector<uint64_t> snaps = NumberedFiles(dir_, "snapshot-", ".snap");
  uint64_t first_log = 1;
  if (!snaps.empty()) {
    RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(SnapshotPath(snaps.back())));
    snapshot_size_ = bytes.size();
    uint64_t log_number = 0;
    auto payload = DecodeSnapshotFile(bytes, &log_number);
    if (!payload.ok()) return payload.status().WithContext(SnapshotPath(snaps.back()));
    Status s = store_.LoadSnapshot(payload->data(), payload->size());
    if (!s.ok()) return Status::Corruption(SnapshotPath(snaps.back()) + ": " + s.message());
    first_log = log_number;
    report->had_snapshot = true;
    report->snapshot_log = log_number;
  }
  std::vector<uint64_t> logs = NumberedFiles(dir_, "wal-", ".log");
  logs.erase(std::remove_if(logs.begin(), logs.end(), [&](uint64_t n) { return n < first_log; }), logs.end());
  uint64_t keep = 0;
  log_number_ = logs.empty() ? first_log : logs.back();
  for (size_t i = 0; i < logs.size(); ++i) {
    WalScan scan;
    Status s = ReadWal(LogPath(logs[i]), [&](const char* p, size_t n) -> Status {
      RL_ASSIGN_OR_RETURN(Record r, DecodeRecord(p, n));
      store_.Apply(std::move(r));
      return Status::OK();
    }, &scan);
    if (!s.ok()) return s.WithContext(LogPath(logs[i]));
    report->logs++;
    report->records += scan.records;
    bool last = i + 1 == logs.size();
    // A log before the last one ends whole, or in the zero padding of a writer killed between
    // opening the next log and its clean close (StartSnapshot).
    if (!scan.tail_error.empty() && !last && !scan.zero_padding) {
      return Status::Corruption(LogPath(logs[i]) + ": " + scan.tail_error + " at byte " +
                                std::to_string(scan.good_bytes) + ", and later logs exist");
    }
    if (last) {
      keep = scan.good_bytes;
      report->torn_bytes = scan.file_bytes - scan.good_bytes;
      report->torn_reason = scan.tail_error;
    }
  }
  RL_ASSIGN_OR_RETURN(wal_, WalWriter::Open(LogPath(log_number_), keep, 0, notify_fd_, direct_log_));
  if (report->torn_bytes > 0) RL_RETURN_IF_ERROR(wal_->Sync());
  return FsyncDir(dir_);
}

uint64_t DurableStore::Commit(Record& r) {
  uint64_t end = wal_->Append(EncodeRecordPayload(r));
  store_.Apply(std::move(r));
  return end;
}

Status DurableStore::status() const {
  RL_RETURN_IF_ERROR(wal_->status());
  if (snapshot_done_.load(std::memory_order_acquire)) return snapshot_status_;
  return Status::OK();
}

Status DurableStore::MaybeSnapshot(bool sync_log) {
  if (snapshot_thread_.joinable()) {
    if (!snapshot_done_.load(std::memory_order_acquire)) return Status::OK();
    RL_RETURN_IF_ERROR(ReapSnapshot(false));
  }
  // Also wait until the log is twice the live state: a snapshot costs as much as the state, so a
  // large state with a small threshold would otherwise be rewritten again and again.
  if (wal_->bytes() < threshold_ || wal_->bytes() < 2 * store_.live_bytes()) return Status::OK();
  return StartSnapshot(sync_log);
}

Status DurableStore::Snapshot(bool sync_log) {
  RL_RETURN_IF_ERROR(ReapSnapshot(true));
  RL_RETURN_IF_ERROR(StartSnapshot(sync_log));
  return ReapSnapshot(true);
}

Status DurableStore::ReapSnapshot(bool wait) {
  if (!snapshot_thread_.joinable() || (!wait && !snapshot_done_.load(std::memory_order_acquire))) {
    return Status::OK();
  }
  snapshot_thread_.join();
  snapshot_done_.store(false);
  if (!snapshot_status_.ok()) return snapshot_status_;
  snapshot_size_ = snapshot_file_bytes_;
  return Status::OK();
}

// The new log is created first: a crash before the snapshot's rename leaves the old snapshot and
// every log after it, which recovery replays in order. The old log is whole (and synced when the
// policy syncs) before the new one starts, so the replies waiting on it need not wait for the
// snapshot.
Status DurableStore::StartSnapshot(bool sync_log) {
  RL_RETURN_IF_ERROR(sync_log ? wal_->Sync() : wal_->Flush());
  uint64_t next = log_number_ + 1;
  RL_ASSIGN_OR_RETURN(auto next_wal, WalWriter::Open(LogPath(next), 0, wal_->appended(), notify_fd_, direct_log_));
  RL_RETURN_IF_ERROR(FsyncDir(dir_));
  WalPayload payload = store_.EncodeSnapshotPayload();
  wal_ = std::move(next_wal);
  log_number_ = next;
  spdlog::info("snapshot of {} rows ({} bytes) before log {}", store_.live_rows(), payload.size, next);
  snapshot_thread_ = std::thread([this, next, p = std::move(payload)]() mutable { WriteSnapshot(next, std::move(p)); });
  return Status::OK();
}

void DurableStore::WriteSnapshot(uint64_t next, WalPayload payload) {
  std::vector<std::string_view> pieces = PayloadPieces(payload);
  std::string header = SnapshotHeader(next, pieces);
  pieces.insert(pieces.begin(), header);
  std::string path = SnapshotPath(next), tmp = path + ".tmp";
  snapshot_status_ = WriteFileDirect(tmp, pieces);
  if (snapshot_status_.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) {
    snapshot_status_ = Status::IOError(ErrnoMessage("rename", tmp));
  }
  if (snapshot_status_.ok()) snapshot_status_ = FsyncDir(dir_);
  snapshot_file_bytes_ = header.size() + payload.size;
  if (snapshot_status_.ok()) {
    std::error_code ec;
    for (uint64_t n : NumberedFiles(dir_, "wal-", ".log")) {
      if (n < next) fs::remove(LogPath(n), ec);
    }
    for (uint64_t n : NumberedFiles(dir_, "snapshot-", ".snap")) {
      if (n < next) fs::remove(SnapshotPath(n), ec);
    }
  }
  snapshot_done_.store(true, std::memory_order_release);
}

}  // namespace rl::queue
