// ChunkCrc: the CRC-32C of a weight chunk (bundle.h) at memory speed.
//
// It is rl::Crc32c, which runs three crc32 chains at once over 2 KiB stripes where the CPU has
// the instruction (one dependent chain runs at a third of what the core can do). Measured on this
// machine, 100 MB: memcpy ~2.4 GB/s, one chain ~2.5 GB/s, three ~4.3 GB/s. Verifying a mapped bundle reads it once and writes nothing, so
// it costs less than the copy that ucx_perftest's get makes.
// Thread safety: reentrant.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rl::weights {

// `crc` is the CRC of bytes that came before these: ChunkCrc(b, n, ChunkCrc(a, m)) is the CRC
// of a followed by b (as rl::Crc32c's seed).
uint32_t ChunkCrc(const void* data, size_t size, uint32_t crc = 0);

}  // namespace rl::weights
