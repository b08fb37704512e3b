// Values as JSON, for the command-line tools' JSON lines (rl-queue put / get).
//   null, true/false, integers, floats and strings map to themselves;
//   an array of integers is a 1-D i64 tensor, an array with any float a 1-D f64 tensor;
//   {"dtype": "f32", "shape": [2, 3], "data": [...]} is any tensor (data flattened row-major);
//   {"hex": "00ff"} is bytes.
// ToJson writes 1-D i64 and f64 tensors as plain arrays and every other tensor in the object form,
// so FromJson(ToJson(v)) == v for every value except f16/bf16 tensors (written as hex).
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "rl/core/status.h"
#include "rl/wire/value.h"

namespace rl {

Result<Value> ValueFromJson(const nlohmann::json& j);
// False when `text` nests arrays and objects deeper than max_depth (strings skipped, so brackets
// inside them do not count). nlohmann's dump recurses per level: text from outside (a model's
// tool call, a client's arguments) is checked with this before it is parsed and dumped again.
bool JsonDepthWithin(std::string_view text, int max_depth);
constexpr int kMaxJsonDepth = 256;
nlohmann::json ValueToJson(const Value& v);

}  // namespace rl
