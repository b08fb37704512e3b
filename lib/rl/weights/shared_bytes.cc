#include "rl/weights/shared_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace rl::weights {
namespace {

constexpr int kSeals = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

std::string NameOf(uint64_t version) { return "rl-weights-" + std::to_string(version); }

Status Errno(const std::string& what) { return Status::IOError(what + ": " + std::strerror(errno)); }

}  // namespace

SharedBytes::~SharedBytes() {
  if (mapped_) ::munmap(const_cast<char*>(data_), mapped_);
  if (fd_ >= 0) ::close(fd_);
}

Status SharedBytes::Map(size_t size, bool populate) {
  size_t len = size == 0 ? 1 : size;
  // A puller's mapping is not populated: its faults map 16 pages each (fault-around) on the
  // threads that check it, and populating the page tables of 100 MB up front took longer
  // (10-40 ms) than the whole CRC pass over them (~20 ms). The source's is, once per version
  // when it is published: otherwise the first tagged send of every version faulted each page
  // in on the sending thread, in the middle of a pull.
  void* p = ::mmap(nullptr, len, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd_, 0);
  if (p == MAP_FAILED) return Errno("map " + std::to_string(size) + " bytes of weights");
  data_ = static_cast<const char*>(p);
  size_ = size;
  mapped_ = len;
  return Status::OK();
}

Result<std::shared_ptr<SharedBytes>> SharedBytes::Seal(uint64_t version, const char* data, size_t size) {
  std::shared_ptr<SharedBytes> b(new SharedBytes());
  b->fd_ = ::memfd_create(NameOf(version).c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (b->fd_ < 0) return Errno("memfd_create");
  size_t len = size == 0 ? 1 : size;
  if (::ftruncate(b->fd_, static_cast<off_t>(len)) != 0) return Errno("size the weights memfd");
  // write(2), not a mapping: filling a writable mapping cost page-table work for every 4 KiB
  // page on top of allocating it (100 MB: ~190 ms against ~90 ms here), and the write needs no
  // writable mapping to be gone before F_SEAL_WRITE.
  for (size_t off = 0; off < size;) {
    ssize_t n = ::pwrite(b->fd_, data + off, size - off, static_cast<off_t>(off));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("write the weights memfd");
    off += static_cast<size_t>(n);
  }
  if (::fcntl(b->fd_, F_ADD_SEALS, kSeals) != 0) return Errno("seal the weights memfd");
  RL_RETURN_IF_ERROR(b->Map(size, true));
  return b;
}

Result<std::shared_ptr<SharedBytes>> SharedBytes::Open(int pid, int fd, uint64_t version, size_t size) {
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  std::shared_ptr<SharedBytes> b(new SharedBytes());
  b->fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (b->fd_ < 0) return Status::NotFound("open " + path + ": " + std::strerror(errno));
  // The name guards against a pid of another namespace that names some other process's fd.
  char link[256] = {0};
  std::string want = "/memfd:" + NameOf(version) + " (deleted)";
  ssize_t n = ::readlink(("/proc/self/fd/" + std::to_string(b->fd_)).c_str(), link, sizeof(link) - 1);
  if (n <= 0 || want != link) return Status::Protocol(path + " is '" + link + "', not " + want);
  struct stat st {};
  if (::fstat(b->fd_, &st) != 0) return Errno("stat " + path);
  size_t len = size == 0 ? 1 : size;
  if (static_cast<size_t>(st.st_size) != len) {
    return Status::Protocol(path + " holds " + std::to_string(st.st_size) + " bytes, not " + std::to_string(len));
  }
  int seals = ::fcntl(b->fd_, F_GET_SEALS);
  if (seals < 0 || (seals & kSeals) != kSeals) return Status::Protocol(path + " is not sealed against writes");
  RL_RETURN_IF_ERROR(b->Map(size, false));
  return b;
}

}  // namespace rl::weights
