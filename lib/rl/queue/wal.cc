#include "rl/queue/wal.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "rl/core/crc32c.h"
#include "rl/core/fs.h"

namespace rl::queue {

Result<std::unique_ptr<WalWriter>> WalWriter::Open(const std::string& path, uint64_t keep_bytes) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IOError(ErrnoMessage("open", path));
  if (::ftruncate(fd, static_cast<off_t>(keep_bytes)) != 0 || ::lseek(fd, 0, SEEK_END) < 0) {
    Status s = Status::IOError(ErrnoMessage("truncate", path));
    ::close(fd);
    return s;
  }
  return std::unique_ptr<WalWriter>(new WalWriter(path, fd, keep_bytes));
}

WalWriter::~WalWriter() {
  (void)Flush();
  ::close(fd_);
}

void WalWriter::Append(std::string payload) {
  uint32_t header[2] = {static_cast<uint32_t>(payload.size()), Crc32c(payload.data(), payload.size())};
  pending_.emplace_back(reinterpret_cast<const char*>(header), sizeof(header));
  pending_bytes_ += sizeof(header) + payload.size();
  pending_.push_back(std::move(payload));
}

// writev(2)s the pending pieces, IOV_MAX at a time, resuming after short writes.
Status WalWriter::Flush() {
  size_t piece = 0, offset = 0;  // first byte not yet written
  while (piece < pending_.size()) {
    struct iovec iov[IOV_MAX];
    int n = 0;
    for (size_t i = piece; i < pending_.size() && n < IOV_MAX; ++i, ++n) {
      size_t skip = i == piece ? offset : 0;
      iov[n].iov_base = const_cast<char*>(pending_[i].data() + skip);
      iov[n].iov_len = pending_[i].size() - skip;
    }
    ssize_t written = ::writev(fd_, iov, n);
    if (written < 0 && errno == EINTR) continue;
    if (written < 0) {
      pending_.erase(pending_.begin(), pending_.begin() + piece);
      if (!pending_.empty()) pending_.front().erase(0, offset);
      return Status::IOError(ErrnoMessage("write", path_));
    }
    file_bytes_ += static_cast<size_t>(written);
    pending_bytes_ -= static_cast<size_t>(written);
    unsynced_ = true;
    size_t left = static_cast<size_t>(written);
    while (left > 0) {
      size_t rest = pending_[piece].size() - offset;
      if (left >= rest) {
        left -= rest;
        ++piece;
        offset = 0;
      } else {
        offset += left;
        left = 0;
      }
    }
  }
  pending_.clear();
  return Status::OK();
}

Status WalWriter::Sync() {
  RL_RETURN_IF_ERROR(Flush());
  if (!unsynced_) return Status::OK();
  if (::fdatasync(fd_) != 0) return Status::IOError(ErrnoMessage("fdatasync", path_));
  unsynced_ = false;
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
  return Status::OK();
}

Status ReadWal(const std::string& path, const std::function<Status(const char*, size_t)>& on_record, WalScan* scan) {
  RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ScanWalBytes(bytes, on_record, scan);
}

}  // namespace rl::queue
