#include "rl/queue/durable.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
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

std::string EncodeSnapshotFile(uint64_t log_number, const std::string& payload) {
  std::string out(kSnapMagic, 4);
  uint32_t version = 1;
  uint64_t length = payload.size();
  uint32_t crc = Crc32c(payload.data(), payload.size());
  out.append(reinterpret_cast<const char*>(&version), 4);
  out.append(reinterpret_cast<const char*>(&log_number), 8);
  out.append(reinterpret_cast<const char*>(&length), 8);
  out.append(reinterpret_cast<const char*>(&crc), 4);
  out.append(payload);
  return out;
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
                                                         RecoveryReport* report) {
  RL_RETURN_IF_ERROR(MakeDirs(dir));
  std::string lock = dir + "/LOCK";
  int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(ErrnoMessage("open", lock));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return Status::Unavailable("another rl-queue server holds " + lock);
  }
  std::unique_ptr<DurableStore> ds(new DurableStore(dir, fd, snapshot_bytes));
  *report = RecoveryReport();
  RL_RETURN_IF_ERROR(ds->Recover(report));
  return ds;
}

DurableStore::~DurableStore() {
  wal_.reset();
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
    if (!scan.tail_error.empty() && !last) {
      return Status::Corruption(LogPath(logs[i]) + ": " + scan.tail_error + " at byte " +
                                std::to_string(scan.good_bytes) + ", and later logs exist");
    }
    if (last) {
      keep = scan.good_bytes;
      report->torn_bytes = scan.file_bytes - scan.good_bytes;
      report->torn_reason = scan.tail_error;
    }
  }
  RL_ASSIGN_OR_RETURN(wal_, WalWriter::Open(LogPath(log_number_), keep));
  if (report->torn_bytes > 0) RL_RETURN_IF_ERROR(wal_->Sync());
  return FsyncDir(dir_);
}

void DurableStore::Commit(Record& r) {
  wal_->Append(EncodeRecord(r));
  store_.Apply(std::move(r));
}

Status DurableStore::MaybeSnapshot() {
  // Also wait until the log is twice the live state: a snapshot costs as much as the state, so a
  // large state with a small threshold would otherwise be rewritten again and again.
  if (wal_->bytes() < threshold_ || wal_->bytes() < 2 * store_.live_bytes()) return Status::OK();
  return Snapshot();
}

// The new log is created first: a crash before the snapshot's rename leaves the old snapshot and
// every log after it, which recovery replays in order.
Status DurableStore::Snapshot() {
  // The records the snapshot covers are synced already if the policy syncs at all; the snapshot
  // is fsynced before the old log goes, so the old log needs no fsync of its own here.
  RL_RETURN_IF_ERROR(wal_->Flush());
  uint64_t next = log_number_ + 1;
  RL_ASSIGN_OR_RETURN(auto next_wal, WalWriter::Open(LogPath(next), 0));
  RL_RETURN_IF_ERROR(FsyncDir(dir_));
  std::string file = EncodeSnapshotFile(next, store_.EncodeSnapshot());
  RL_RETURN_IF_ERROR(WriteFileAtomic(SnapshotPath(next), file));
  snapshot_size_ = file.size();
  wal_ = std::move(next_wal);
  uint64_t old = log_number_;
  log_number_ = next;
  std::error_code ec;
  for (uint64_t n : NumberedFiles(dir_, "wal-", ".log")) {
    if (n <= old) fs::remove(LogPath(n), ec);
  }
  for (uint64_t n : NumberedFiles(dir_, "snapshot-", ".snap")) {
    if (n < next) fs::remove(SnapshotPath(n), ec);
  }
  spdlog::info("snapshot of {} rows ({} bytes) before log {}", store_.live_rows(), file.size(), next);
  return Status::OK();
}

}  // namespace rl::queue
