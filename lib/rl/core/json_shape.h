// A scan of JSON text before it is parsed: how deep arrays and objects nest and how long arrays
// are, strings skipped (brackets and commas inside them do not count). nlohmann's parser builds
// and its dump recurses per level, so text from outside (a model's tool call, a client's
// arguments, a safetensors header) is bounded with this first.
// Thread safety: reentrant.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

namespace rl {

enum class JsonShape { kWithin, kTooDeep, kArrayTooLong };

// kTooDeep when arrays and objects nest deeper than max_depth, kArrayTooLong when an array has
// more than max_array entries (counted by its commas), kWithin otherwise. Not a validator: text
// that is not JSON may pass.
JsonShape ScanJsonShape(std::string_view text, int max_depth,
                        int64_t max_array = std::numeric_limits<int64_t>::max());

}  // namespace rl
