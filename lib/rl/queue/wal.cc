#include "rl/queue/wal.h"

#include <fcntl.h>
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

void WalWriter::Append(const std::string& payload) {
  uint32_t header[2] = {static_cast<uint32_t>(payload.size()), Crc32c(payload.data(), payload.size())};
  buffer_.append(reinterpret_cast<const char*>(header), sizeof(header));
  buffer_.append(payload);
}

Status WalWriter::Flush() {
  size_t done = 0;
  while (done < buffer_.size()) {
    ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      buffer_.erase(0, done);
      file_bytes_ += done;
      return Status::IOError(ErrnoMessage("write", path_));
    }
    done += static_cast<size_t>(n);
  }
  file_bytes_ += done;
  unsynced_ = unsynced_ || done > 0;
  buffer_.clear();
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
