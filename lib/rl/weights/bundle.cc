#include "rl/weights/bundle.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "rl/core/crc32c.h"
#include "rl/weights/chunk_crc.h"

namespace rl::weights {
namespace {

void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

}  // namespace

uint64_t ChunkTable::ChunkLength(size_t i) const {
  uint64_t off = ChunkOffset(i);
  return off >= size ? 0 : std::min<uint64_t>(chunk_size, size - off);
}

uint32_t ChunkTable::Digest() const {
  std::string buf;
  buf.reserve(12 + 4 * crcs.size());
  for (int i = 0; i < 8; ++i) buf.push_back(static_cast<char>((size >> (8 * i)) & 0xff));
  PutU32(&buf, chunk_size);
  for (uint32_t c : crcs) PutU32(&buf, c);
  return Crc32c(buf.data(), buf.size());
}

Status ChunkTable::Validate() const {
  if (chunk_size < kMinChunkBytes || chunk_size > kMaxChunkBytes) {
    return Status::Protocol("chunk size " + std::to_string(chunk_size) + " out of range");
  }
  uint64_t want = (size + chunk_size - 1) / chunk_size;
  if (crcs.size() != want) {
    return Status::Protocol(std::to_string(crcs.size()) + " chunk CRCs for " + std::to_string(want) + " chunks");
  }
  return Status::OK();
}

ChunkTable ChunkTable::Of(const char* data, uint64_t size, uint32_t chunk_size) {
  ChunkTable t;
  t.size = size;
  t.chunk_size = chunk_size;
  uint64_t n = (size + chunk_size - 1) / chunk_size;
  t.crcs.reserve(n);
  for (uint64_t i = 0; i < n; ++i) t.crcs.push_back(ChunkCrc(data + t.ChunkOffset(i), t.ChunkLength(i)));
  return t;
}

std::string ChunkTable::EncodeCrcs() const {
  std::string out;
  out.reserve(4 * crcs.size());
  for (uint32_t c : crcs) PutU32(&out, c);
  return out;
}

Result<std::vector<uint32_t>> ChunkTable::DecodeCrcs(const std::string& bytes) {
  if (bytes.size() % 4 != 0) return Status::Protocol("chunk CRC table of " + std::to_string(bytes.size()) + " bytes");
  std::vector<uint32_t> out(bytes.size() / 4);
  for (size_t i = 0; i < out.size(); ++i) out[i] = GetU32(bytes.data() + 4 * i);
  return out;
}

std::string DigestHex(uint32_t digest) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", digest);
  return buf;
}

Status CheckSafetensorsFrame(const char* data, uint64_t size) {
  if (size < 10) return Status::DataError("weights of " + std::to_string(size) + " bytes are not a safetensors file");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{static_cast<uint8_t>(data[i])} << (8 * i);
  if (n < 2 || n > size - 8 || data[8] != '{') {
    return Status::DataError("weights do not start with a safetensors header (header length " + std::to_string(n) +
                             " in " + std::to_string(size) + " bytes)");
  }
  return Status::OK();
}

Result<Bundle> Bundle::Make(uint64_t version, std::shared_ptr<const BundleBytes> bytes, uint32_t chunk_size) {
  if (chunk_size < kMinChunkBytes || chunk_size > kMaxChunkBytes) {
    return Status::InvalidArgument("chunk size " + std::to_string(chunk_size) + " outside " +
                                   std::to_string(kMinChunkBytes) + ".." + std::to_string(kMaxChunkBytes));
  }
  RL_RETURN_IF_ERROR(CheckSafetensorsFrame(bytes->data(), bytes->size()));
  Bundle b;
  b.version = version;
  b.table = ChunkTable::Of(bytes->data(), bytes->size(), chunk_size);
  b.bytes = std::move(bytes);
  return b;
}

Result<Bundle> Bundle::FromString(uint64_t version, std::string bytes, uint32_t chunk_size) {
  return Make(version, std::make_shared<StringBytes>(std::move(bytes)), chunk_size);
}

Status Bundle::Verify() const {
  if (!bytes || bytes->size() != table.size) return Status::Corruption("bundle size does not match its table");
  for (size_t i = 0; i < table.chunks(); ++i) {
    if (ChunkCrc(data() + table.ChunkOffset(i), table.ChunkLength(i)) != table.crcs[i]) {
      return Status::Corruption("chunk " + std::to_string(i) + " of version " + std::to_string(version) +
                                " does not match its CRC-32C");
    }
  }
  return Status::OK();
}

}  // namespace rl::weights
