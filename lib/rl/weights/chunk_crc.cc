#include "rl/weights/chunk_crc.h"

#include "rl/core/crc32c.h"

namespace rl::weights {

uint32_t ChunkCrc(const void* data, size_t size, uint32_t crc) { return Crc32c(data, size, crc); }

}  // namespace rl::weights
