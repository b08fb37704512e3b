// Bundle: one weight version in memory, the unit that sources serve and pullers fetch.
//
// The bytes are a safetensors file (docs/design.md "Weights": a checkpoint file and a bundle are the
// same bytes). With them travel the version number and a content hash:
//   chunk i   = bytes [i * chunk_size, min(size, (i + 1) * chunk_size))
//   crc[i]    = CRC-32C of chunk i                          (hardware CRC, ~10 GB/s)
//   digest    = CRC-32C of: size (u64 LE) | chunk_size (u32 LE) | crc[0..n) (u32 LE each)
// A puller checks each chunk against crc[i] as it arrives (a bad chunk is fetched again) and the
// whole table against the digest before the bundle may be used. The chunk CRCs catch transport
// and memory corruption; the digest names the content, so two sources can be compared cheaply.
//
// Thread safety: a Bundle is an immutable value once built; copies share the bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rl/core/status.h"

namespace rl::weights {

constexpr uint32_t kDefaultChunkBytes = 4u << 20;
constexpr uint32_t kMinChunkBytes = 4096;
constexpr uint32_t kMaxChunkBytes = 256u << 20;

// Where a bundle's bytes live: a string, or a UCX region (so a puller can serve what it pulled
// without a copy).
class BundleBytes {
 public:
  virtual ~BundleBytes() = default;
  virtual const char* data() const = 0;
  virtual size_t size() const = 0;
};

class StringBytes : public BundleBytes {
 public:
  explicit StringBytes(std::string s) : s_(std::move(s)) {}
  const char* data() const override { return s_.data(); }
  size_t size() const override { return s_.size(); }

 private:
  std::string s_;
};

struct ChunkTable {
  uint64_t size = 0;
  uint32_t chunk_size = kDefaultChunkBytes;
  std::vector<uint32_t> crcs;

  size_t chunks() const { return crcs.size(); }
  uint64_t ChunkOffset(size_t i) const { return uint64_t{chunk_size} * i; }
  uint64_t ChunkLength(size_t i) const;
  uint32_t Digest() const;
  // OK when the table is self-consistent: as many CRCs as chunks of `size` bytes.
  Status Validate() const;
  // The table of `size` bytes at `data`.
  static ChunkTable Of(const char* data, uint64_t size, uint32_t chunk_size);
  // crcs as u32 LE, the form they travel in.
  std::string EncodeCrcs() const;
  static Result<std::vector<uint32_t>> DecodeCrcs(const std::string& bytes);
};

// "0x1234abcd"
std::string DigestHex(uint32_t digest);

// OK when the bytes start like a safetensors file: an 8-byte header length N with 8 + N <= size
// and a header that opens with '{'. A cheap check that a bundle is a weight file at all.
Status CheckSafetensorsFrame(const char* data, uint64_t size);

struct Bundle {
  uint64_t version = 0;
  ChunkTable table;
  std::shared_ptr<const BundleBytes> bytes;

  const char* data() const { return bytes->data(); }
  uint64_t size() const { return table.size; }
  uint32_t digest() const { return table.Digest(); }

  // Builds the table over `bytes`; DataError when they are not a safetensors frame.
  static Result<Bundle> Make(uint64_t version, std::shared_ptr<const BundleBytes> bytes,
                             uint32_t chunk_size = kDefaultChunkBytes);
  static Result<Bundle> FromString(uint64_t version, std::string bytes, uint32_t chunk_size = kDefaultChunkBytes);
  // Recomputes every chunk CRC: Corruption naming the first chunk that does not match.
  Status Verify() const;
};

}  // namespace rl::weights
