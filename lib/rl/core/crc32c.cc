#include "rl/core/crc32c.h"

#include <array>
#include <cstring>

namespace rl {
namespace {

// Slicing-by-8 tables for the reflected polynomial 0x82F63B78.
struct Tables {
  std::array<std::array<uint32_t, 256>, 8> t{};
  Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i) {
      for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

#if defined(__x86_64__)
// The SSE4.2 crc32 instruction computes CRC-32C 8 bytes at a time, about 10x the table's speed;
// every log record is checksummed on the log writer's thread, so it matters.
// It sums three streams at once: the instruction takes 3 cycles but can start every cycle, so a
// block of 3 x kStripe bytes is summed as three independent stripes, whose sums are then joined:
// for the raw register (no inversions) summing is linear, so
//   crc(A B C) = shift(shift(crc(A)) ^ crc(B)) ^ crc(C),
// where shift(c) is the register after kStripe zero bytes from c, a linear map applied through
// four byte tables.
constexpr size_t kStripe = 2048;

__attribute__((target("sse4.2"))) uint64_t Crc32cWords(uint64_t c, const uint8_t* p, size_t words) {
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, p + 8 * i, 8);
    c = __builtin_ia32_crc32di(c, word);
  }
  return c;
}

struct StripeShift {
  std::array<std::array<uint32_t, 256>, 4> t{};
  StripeShift() {
    uint8_t zeros[kStripe] = {};
    uint32_t column[32];
    for (int bit = 0; bit < 32; ++bit) {
      column[bit] = static_cast<uint32_t>(Crc32cWords(uint32_t{1} << bit, zeros, kStripe / 8));
    }
    for (int k = 0; k < 4; ++k) {
      for (uint32_t b = 0; b < 256; ++b) {
        uint32_t v = 0;
        for (int bit = 0; bit < 8; ++bit) {
          if (b >> bit & 1) v ^= column[8 * k + bit];
        }
        t[k][b] = v;
      }
    }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][c >> 24];
  }
};

const StripeShift& GetStripeShift() {
  static const StripeShift shift;
  return shift;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const uint8_t* p, size_t size, uint32_t seed) {
  uint64_t c = ~seed;
  if (size >= 3 * kStripe) {
    const StripeShift& shift = GetStripeShift();
    while (size >= 3 * kStripe) {
      uint64_t a = c, b = 0, d = 0;
      for (size_t i = 0; i < kStripe; i += 8) {
        uint64_t wa, wb, wd;
        std::memcpy(&wa, p + i, 8);
        std::memcpy(&wb, p + kStripe + i, 8);
        std::memcpy(&wd, p + 2 * kStripe + i, 8);
        a = __builtin_ia32_crc32di(a, wa);
        b = __builtin_ia32_crc32di(b, wb);
        d = __builtin_ia32_crc32di(d, wd);
      }
      c = shift(shift(static_cast<uint32_t>(a)) ^ static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(d);
      p += 3 * kStripe;
      size -= 3 * kStripe;
    }
  }
  c = Crc32cWords(c, p, size / 8);
  p += size / 8 * 8;
  size %= 8;
  uint32_t c32 = static_cast<uint32_t>(c);
  while (size--) c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}

bool HasHardwareCrc() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

uint32_t Crc32cSoftware(const void* data, size_t size, uint32_t seed) {
  const auto& t = GetTables().t;
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~seed;
  while (size >= 8) {
    uint32_t lo = c ^ (uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24);
    uint32_t hi = uint32_t(p[4]) | uint32_t(p[5]) << 8 | uint32_t(p[6]) << 16 | uint32_t(p[7]) << 24;
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
        t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    p += 8;
    size -= 8;
  }
  while (size--) c = (c >> 8) ^ t[0][(c ^ *p++) & 0xFF];
  return ~c;
}

}  // namespace

uint32_t Crc32c(const void* data, size_t size, uint32_t seed) {
#if defined(__x86_64__)
  if (HasHardwareCrc()) return Crc32cHardware(static_cast<const uint8_t*>(data), size, seed);
#endif
  return Crc32cSoftware(data, size, seed);
}

uint32_t Crc32cPortable(const void* data, size_t size, uint32_t seed) { return Crc32cSoftware(data, size, seed); }

}  // namespace rl
