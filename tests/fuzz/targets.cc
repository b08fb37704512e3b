#include "targets.h"

#include <string>
#include <vector>

#include "rl/queue/durable.h"
#include "rl/queue/protocol.h"
#include "rl/queue/store.h"
#include "rl/queue/unit_protocol.h"
#include "rl/queue/wal.h"

namespace rl::fuzz {

void FuzzFrames(const uint8_t* data, size_t size) {
  // Frames are separated by the byte sequence "|#|", so the fuzzer can shape several frames.
  std::string all(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> frames;
  size_t start = 0;
  while (true) {
    size_t at = all.find("|#|", start);
    frames.push_back(all.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos || frames.size() > 16) break;
    start = at + 3;
  }
  auto m = DecodeRequest(frames);
  if (!m.ok()) return;
  (void)queue::DecodePut(*m);
  (void)queue::DecodeGet(*m);
  (void)queue::DecodeIndices(*m);
  (void)queue::DecodeMetaGet(*m);
  (void)queue::DecodeMetaSet(*m);
  (void)queue::DecodeDeclare(*m);
  (void)queue::DecodeRetire(*m);
  (void)queue::DecodeGetReply(*m);
  (void)queue::DecodeIndexReply(*m);
  (void)queue::DecodePutCommand(m->body, m->blobs, nullptr);  // unit references (ext 3) too
  (void)queue::DecodeRead(m->body);
  (void)queue::DecodeFree(m->body);
  (void)queue::DecodeList(m->body);
  (void)queue::DecodeHeld(m->body);
  (void)queue::DecodeListReply(m->body);
  (void)queue::DecodeHeldReply(m->body);
}

void FuzzWal(const uint8_t* data, size_t size) {
  queue::Store store;
  queue::WalScan scan;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)queue::ScanWalBytes(bytes, [&](const char* p, size_t n) -> Status {
    auto r = queue::DecodeRecord(p, n);
    if (r.ok()) store.Apply(*r);
    return Status::OK();
  }, &scan);
  // A CRC-valid record can still say anything: decode the payload bytes directly as well, so the
  // fuzzer reaches the record decoder and Apply without having to forge checksums.
  auto r = queue::DecodeRecord(bytes.data(), bytes.size());
  if (r.ok()) store.Apply(*r);
  (void)store.EncodeSnapshot();
}

void FuzzSnapshot(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  queue::Store store;
  uint64_t log = 0;
  auto payload = queue::DecodeSnapshotFile(bytes, &log);
  if (payload.ok()) (void)store.LoadSnapshot(payload->data(), payload->size());
  queue::Store direct;
  if (direct.LoadSnapshot(bytes.data(), bytes.size()).ok()) (void)direct.EncodeSnapshot();
}

}  // namespace rl::fuzz
