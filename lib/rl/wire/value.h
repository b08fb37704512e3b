// Value: one cell of the queue, the typed values that travel in messages and log records.
// A value is null, bool, int64, float64, string, bytes, or a tensor (dtype, shape, raw
// little-endian bytes). See man/rl-protocol.7 for the encoding.
// Thread safety: plain values.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "rl/core/status.h"

namespace rl {

// Numbers are part of the wire format (the first byte of a tensor ext payload): never renumber.
enum class DType : uint8_t {
  kBool = 0, kU8 = 1, kI8 = 2, kI16 = 3, kI32 = 4, kI64 = 5, kF16 = 6, kBF16 = 7, kF32 = 8, kF64 = 9,
};
constexpr int kDTypeCount = 10;

const char* DTypeName(DType dtype);             // "f32"
Result<DType> DTypeFromName(const std::string& name);
size_t DTypeSize(DType dtype);

struct Tensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::string data;  // little-endian, row-major, exactly NumElements() * DTypeSize(dtype) bytes

  int64_t NumElements() const;
  // OK when the shape is non-negative and the data length matches it.
  Status Validate() const { return ValidateFor(data.size()); }
  // The same for data of `bytes` bytes held elsewhere.
  Status ValidateFor(size_t bytes) const;
  bool operator==(const Tensor& o) const { return dtype == o.dtype && shape == o.shape && data == o.data; }

  static Tensor FromI64(const std::vector<int64_t>& v);
  static Tensor FromF32(const std::vector<float>& v);
  std::vector<int64_t> ToI64() const;  // REQUIRES: an integer or bool dtype
  std::vector<double> ToF64() const;   // any dtype except f16/bf16
};

struct Bytes {
  std::string data;
  bool operator==(const Bytes& o) const { return data == o.data; }
};

using Value = std::variant<std::monostate, bool, int64_t, double, std::string, Bytes, Tensor>;

// Bytes the value occupies in memory, for limits and statistics.
size_t ValueBytes(const Value& v);
const char* ValueTypeName(const Value& v);

// The value of column `name` in a row's named columns (a row a get handed out, a put's row):
// the first of that name, or nullptr when there is none.
const Value* FindColumn(const std::vector<std::pair<std::string, Value>>& columns, std::string_view name);

}  // namespace rl
