// Safetensors: the weight file format, read and written by our own code.
//
// Grammar (https://github.com/huggingface/safetensors, "Format"):
//   file   := N:u64-le  header:N bytes  data
//   header := UTF-8 JSON object, padded at the end with spaces (0x20); our writer makes 8 + N a
//             multiple of 8 so the data starts aligned
//     { "<tensor name>": {"dtype": D, "shape": [d0, ...], "data_offsets": [begin, end]}, ...,
//       "__metadata__": {"<key>": "<string value>", ...} }            (metadata optional)
//   D      := "F64" | "F32" | "F16" | "BF16" | "I64" | "I32" | "I16" | "I8" | "U8" | "BOOL"
//   data   := the tensors' bytes, row-major, little-endian; offsets are relative to the start of
//             data; [begin, end) spans exactly prod(shape) * sizeof(D) bytes.
// The reader is strict, as the reference implementation is: the spans must tile the data
// section exactly (no overlap, no gap, no trailing bytes), BOOL bytes are 0 or 1. To bound the
// memory a hostile header can cost, it is stricter than the reference in three ways, none of which
// a weight file comes near: N <= kMaxHeaderBytes (16 MiB; the reference allows 100 MB), JSON
// nesting at most 3 deep, arrays at most 64 long (so at most 62 dimensions). Anything else is
// Status::Corruption, never a crash: files come from outside. The writer lays tensors out
// contiguously in the order given, so any conforming reader accepts its files.
//
// Thread safety: free functions over values; no shared state. This header includes only the ATen
// tensor type.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "rl/core/status.h"
#include "rl/model/transformer.h"  // NamedTensors

namespace rl::model {

constexpr uint64_t kMaxHeaderBytes = uint64_t{16} << 20;

using Metadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  NamedTensors tensors;  // in data-offset order; each owns its memory (CPU, contiguous)
  Metadata metadata;
};

// Encodes tensors (any device, layout, or supported dtype; copied to CPU contiguous) and metadata.
// InvalidArgument for an unsupported dtype, an empty or repeated name, or "__metadata__" used as
// a tensor name.
Result<std::string> EncodeSafetensors(const NamedTensors& tensors, const Metadata& metadata);

// Decodes bytes into tensors and metadata; Corruption when they do not follow the grammar.
Result<SafetensorsContents> DecodeSafetensors(std::string_view bytes);

// File forms: the writer replaces `path` atomically (WriteFileAtomic); IOError from the system.
Status WriteSafetensorsFile(const std::string& path, const NamedTensors& tensors,
                            const Metadata& metadata);
Result<SafetensorsContents> ReadSafetensorsFile(const std::string& path);

}  // namespace rl::model
