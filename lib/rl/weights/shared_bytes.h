// SharedBytes: bundle bytes in a sealed memfd, mapped read-only, that processes on one host share.
//
// A source copies each bundle it serves into a memfd once (Seal): writes it (write(2), never
// through a writable mapping) and seals it against writes, shrinking and growing (F_SEAL_WRITE | F_SEAL_SHRINK |
// F_SEAL_GROW | F_SEAL_SEAL), so the kernel itself keeps the bytes from changing from then on. A
// puller on the same host opens the source's memfd through /proc/<pid>/fd/<fd> (Open), checks
// its name, size and seals, and maps it read-only: no copy at all. It still checks every chunk
// against its CRC before the bundle is used, and because the memfd is sealed, what it checked is
// what it uses. The mapping keeps the pages alive after the source closes them or dies, so a
// bundle a puller holds never goes away under it, and it can serve it on (a relay) as it is.
//
// Thread safety: immutable once made.
#pragma once

#include <memory>
#include <string>

#include "rl/weights/bundle.h"

namespace rl::weights {

class SharedBytes : public BundleBytes {
 public:
  // A sealed memfd named for `version` holding a copy of [data, data + size).
  static Result<std::shared_ptr<SharedBytes>> Seal(uint64_t version, const char* data, size_t size);
  // Maps the memfd `fd` of process `pid`: NotFound when it cannot be opened (another pid
  // namespace, no permission, the source is gone); Protocol when it is not the sealed memfd of
  // `version` with `size` bytes.
  static Result<std::shared_ptr<SharedBytes>> Open(int pid, int fd, uint64_t version, size_t size);
  ~SharedBytes() override;
  SharedBytes(const SharedBytes&) = delete;
  SharedBytes& operator=(const SharedBytes&) = delete;

  const char* data() const override { return data_; }
  size_t size() const override { return size_; }
  // This process's descriptor of the memfd (for an open reply).
  int fd() const { return fd_; }

 private:
  SharedBytes() = default;
  // Maps fd_ read-only; with populate, its page tables are filled at once.
  Status Map(size_t size, bool populate);
  int fd_ = -1;
  const char* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;
};

}  // namespace rl::weights
