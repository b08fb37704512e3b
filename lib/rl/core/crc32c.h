// CRC-32C (Castagnoli), the checksum of write-ahead-log records and snapshot files.
// Software table implementation; same result as iSCSI / LevelDB's crc32c::Value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace rl {

// Uses the CPU's crc32 instruction where there is one.
uint32_t Crc32c(const void* data, size_t size, uint32_t seed = 0);
// The table implementation alone (tests compare the two).
uint32_t Crc32cPortable(const void* data, size_t size, uint32_t seed = 0);

}  // namespace rl
