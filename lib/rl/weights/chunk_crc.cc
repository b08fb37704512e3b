#include "rl/weights/chunk_crc.h"

#include <array>
#include <cstring>

#include "rl/core/crc32c.h"

namespace rl::weights {
namespace {

#if defined(__x86_64__)
constexpr size_t kLane = 8192;  // bytes per chain in a block of 3 * kLane

// Raw crc32 state (no inversion) after `n` more zero bytes, as a table per byte of the state.
struct ShiftTable {
  std::array<std::array<uint32_t, 256>, 4> t{};
};

__attribute__((target("sse4.2"))) uint32_t ZeroShift(uint32_t state, size_t n) {
  uint64_t c = state;
  for (size_t i = 0; i < n; i += 8) c = __builtin_ia32_crc32di(c, 0);
  return static_cast<uint32_t>(c);
}

const ShiftTable& Shift() {
  static const ShiftTable table = [] {
    ShiftTable s;
    uint32_t basis[32];
    for (int j = 0; j < 32; ++j) basis[j] = ZeroShift(1u << j, kLane);  // the shift is linear in the state
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if (b & (1u << bit)) v ^= basis[8 * k + bit];
        }
        s.t[k][b] = v;
      }
    }
    return s;
  }();
  return table;
}

uint32_t ShiftLane(const ShiftTable& s, uint32_t c) {
  return s.t[0][c & 0xff] ^ s.t[1][(c >> 8) & 0xff] ^ s.t[2][(c >> 16) & 0xff] ^ s.t[3][c >> 24];
}

__attribute__((target("sse4.2"))) uint32_t Crc3(const uint8_t* p, size_t size, uint32_t crc) {
  const ShiftTable& shift = Shift();
  uint64_t c = ~crc;
  for (; size >= 3 * kLane; p += 3 * kLane, size -= 3 * kLane) {
    uint64_t c0 = c, c1 = 0, c2 = 0;
    for (size_t i = 0; i < kLane; i += 8) {
      uint64_t a, b, d;
      std::memcpy(&a, p + i, 8);
      std::memcpy(&b, p + kLane + i, 8);
      std::memcpy(&d, p + 2 * kLane + i, 8);
      c0 = __builtin_ia32_crc32di(c0, a);
      c1 = __builtin_ia32_crc32di(c1, b);
      c2 = __builtin_ia32_crc32di(c2, d);
    }
    uint32_t joined = ShiftLane(shift, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
    c = ShiftLane(shift, joined) ^ static_cast<uint32_t>(c2);
  }
  // The tail (less than a block) goes on from the joined state: Crc32c's seed is the state's inverse.
  return Crc32c(p, size, ~static_cast<uint32_t>(c));
}
#endif

}  // namespace

uint32_t ChunkCrc(const void* data, size_t size, uint32_t crc) {
#if defined(__x86_64__)
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware && size >= 3 * kLane) return Crc3(static_cast<const uint8_t*>(data), size, crc);
#endif
  return Crc32c(data, size, crc);
}

}  // namespace rl::weights
