// ChunkCrc: the CRC-32C of a weight chunk (bundle.h) at memory speed.
//
// The value is rl::Crc32c's (the chunk hashes on the wire do not change); only the speed does.
// The crc32 instruction takes 3 cycles and the core can start one a cycle, so one dependent
// chain (rl::Crc32c) runs at a third of what the core can do. ChunkCrc runs three chains over
// the three thirds of each 24 KiB block and joins them with a shift table (CRC-32C is linear:
// crc(A | B) = crc(A) shifted over |B| zero bytes, xor crc of B from a zero state).
// Measured on this machine, 100 MB: memcpy ~2.4 GB/s, rl::Crc32c ~2.5 GB/s, ChunkCrc ~4.3 GB/s
// (rl-profile weights prints them in the same run). Verifying a mapped bundle reads it once and
// writes nothing, so it costs less than the copy that ucx_perftest's get makes.
// Thread safety: reentrant (the shift table is built once, thread-safely).
#pragma once

#include <cstddef>
#include <cstdint>

namespace rl::weights {

// `crc` is the CRC of bytes that came before these: ChunkCrc(b, n, ChunkCrc(a, m)) is the CRC
// of a followed by b (as rl::Crc32c's seed).
uint32_t ChunkCrc(const void* data, size_t size, uint32_t crc = 0);

}  // namespace rl::weights
