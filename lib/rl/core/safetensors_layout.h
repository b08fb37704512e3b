// The layout of a safetensors file, read and checked without libtorch: where each tensor's bytes
// lie, its dtype and shape, and the metadata. rl::model's DecodeSafetensors builds tensors over
// it; rl-relay publish checks a file with it before serving it, so that a file no reader would
// take is refused at the source (exit 65), not by every rollout that pulls it.
//
// Grammar (https://github.com/huggingface/safetensors, "Format"):
//   file   := N:u64-le  header:N bytes  data
//   header := UTF-8 JSON object, padded at the end with spaces (0x20)
//     { "<tensor name>": {"dtype": D, "shape": [d0, ...], "data_offsets": [begin, end]}, ...,
//       "__metadata__": {"<key>": "<string value>", ...} }            (metadata optional)
//   D      := "F64" | "F32" | "F16" | "BF16" | "I64" | "I32" | "I16" | "I8" | "U8" | "BOOL"
//   data   := the tensors' bytes, row-major, little-endian; offsets are relative to the start of
//             data; [begin, end) spans exactly prod(shape) * sizeof(D) bytes.
// The check is strict, as the reference implementation is: the spans must tile the data section
// exactly (no overlap, no gap, no trailing bytes), BOOL bytes are 0 or 1. To bound the memory a
// hostile header can cost, it is stricter than the reference in three ways, none of which a
// weight file comes near: N <= kMaxSafetensorsHeaderBytes (16 MiB; the reference allows 100 MB),
// JSON nesting at most 3 deep, arrays at most 64 long (so at most 62 dimensions). Anything else
// is Status::Corruption naming what is wrong, never a crash: files come from outside.
//
// Thread safety: a free function over values; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "rl/core/status.h"

namespace rl {

constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{16} << 20;

struct SafetensorsEntry {
  std::string name;
  std::string dtype;  // one of the grammar's D
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // relative to SafetensorsLayout::data_start
};

struct SafetensorsLayout {
  std::vector<SafetensorsEntry> entries;  // in data-offset order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N
};

// The size in bytes of one element of dtype `name`, or 0 when the grammar has no such dtype.
uint64_t SafetensorsElementSize(std::string_view name);

// Reads and checks the layout of a whole file's bytes (header and data: the tiling and the BOOL
// values need the data).
Result<SafetensorsLayout> ReadSafetensorsLayout(std::string_view bytes);

}  // namespace rl
