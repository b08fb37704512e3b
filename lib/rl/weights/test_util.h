// Helpers for the weights tests: fake weight files (a safetensors frame around random bytes).
#pragma once

#include <cstdint>
#include <random>
#include <string>

namespace rl::weights::testing {

// `size` bytes that pass CheckSafetensorsFrame: an 8-byte header length, a small JSON header,
// then random bytes from `seed`.
inline std::string FakeWeights(size_t size, uint64_t seed) {
  std::string header = "{\"__metadata__\":{\"seed\":\"" + std::to_string(seed) + "\"}}";
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  std::mt19937_64 rng(seed);
  while (out.size() + 8 <= size) {
    uint64_t v = rng();
    out.append(reinterpret_cast<const char*>(&v), 8);
  }
  while (out.size() < size) out.push_back(static_cast<char>(rng()));
  return out;
}

}  // namespace rl::weights::testing
