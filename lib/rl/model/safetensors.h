// Safetensors: the weight file format, read and written by our own code.
//
// The grammar, and the checks a file must pass, are in rl/core/safetensors_layout.h, which reads
// the layout without libtorch; this file turns it into tensors. Our writer makes 8 + N a multiple
// of 8 so the data starts aligned, and lays tensors out contiguously in the order given, so any
// conforming reader accepts its files.
//
// Thread safety: free functions over values; no shared state. This header includes only the ATen
// tensor type.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "rl/core/safetensors_layout.h"
#include "rl/core/status.h"
#include "rl/model/transformer.h"  // NamedTensors

namespace rl::model {

constexpr uint64_t kMaxHeaderBytes = kMaxSafetensorsHeaderBytes;

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
