#include "rl/weights/chunk_landing.h"

#include <cstring>

#include "rl/weights/chunk_crc.h"

namespace rl::weights {
namespace {

void* StartUnpack(void*, void* buffer, size_t) {
  auto* l = static_cast<ChunkLanding*>(buffer);
  l->Start();
  return l;
}

size_t PackedSize(void* state) { return static_cast<ChunkLanding*>(state)->length; }

ucs_status_t Unpack(void* state, size_t offset, const void* src, size_t length) {
  return static_cast<ChunkLanding*>(state)->Put(offset, src, length);
}

void Finish(void*) {}

// Landings only receive; UCX calls no pack function for them.
void* StartPack(void*, const void* buffer, size_t) { return const_cast<void*>(buffer); }
size_t Pack(void*, size_t, void*, size_t) { return 0; }

}  // namespace

void ChunkLanding::Start() {
  next = 0;
  crc = 0;
  in_order = true;
  overrun = false;
  started = true;
}

ucs_status_t ChunkLanding::Put(size_t offset, const void* src, size_t n) {
  if (offset > length || n > length - offset) {
    overrun = true;
    return UCS_ERR_MESSAGE_TRUNCATED;
  }
  std::memcpy(dst + offset, src, n);
  if (in_order && offset == next) {
    crc = ChunkCrc(dst + offset, n, crc);  // read back while the piece is in the cache
    next += n;
  } else {
    in_order = false;
  }
  return UCS_OK;
}

std::optional<uint32_t> ChunkLanding::Crc() const {
  if (!started || !in_order || overrun || next != length) return std::nullopt;
  return crc;
}

ucp_datatype_t LandingDatatype() {
  static const ucp_datatype_t dt = [] {
    ucp_generic_dt_ops_t ops{};
    ops.start_pack = &StartPack;
    ops.start_unpack = &StartUnpack;
    ops.packed_size = &PackedSize;
    ops.pack = &Pack;
    ops.unpack = &Unpack;
    ops.finish = &Finish;
    ucp_datatype_t out = 0;
    // Fails only without memory; then receives fall back to contiguous (see pull_tagged.cc).
    if (ucp_dt_create_generic(&ops, nullptr, &out) != UCS_OK) out = 0;
    return out;
  }();
  return dt;
}

}  // namespace rl::weights
