#include "rl/wire/value.h"

#include <cstring>

namespace rl {
namespace {

struct DTypeInfo {
  const char* name;
  size_t size;
};
constexpr DTypeInfo kDTypes[kDTypeCount] = {
    {"bool", 1}, {"u8", 1}, {"i8", 1}, {"i16", 2}, {"i32", 4},
    {"i64", 8},  {"f16", 2}, {"bf16", 2}, {"f32", 4}, {"f64", 8},
};

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));  // hosts are little-endian (checked in CMake)
  return v;
}

}  // namespace

const char* DTypeName(DType dtype) { return kDTypes[static_cast<int>(dtype)].name; }
size_t DTypeSize(DType dtype) { return kDTypes[static_cast<int>(dtype)].size; }

Result<DType> DTypeFromName(const std::string& name) {
  for (int i = 0; i < kDTypeCount; ++i) {
    if (name == kDTypes[i].name) return static_cast<DType>(i);
  }
  return Status::DataError("unknown dtype '" + name + "'");
}

int64_t Tensor::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status Tensor::ValidateFor(size_t bytes) const {
  if (static_cast<int>(dtype) >= kDTypeCount) return Status::DataError("bad tensor dtype");
  if (shape.size() > 8) return Status::DataError("tensor has more than 8 dimensions");
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || d > (int64_t{1} << 40)) return Status::DataError("bad tensor dimension " + std::to_string(d));
    n *= static_cast<uint64_t>(d);
    if (n > (uint64_t{1} << 40)) return Status::DataError("tensor too large");
  }
  if (n * DTypeSize(dtype) != bytes) {
    return Status::DataError("tensor of shape with " + std::to_string(n) + " " + DTypeName(dtype) +
                             " elements has " + std::to_string(bytes) + " bytes");
  }
  return Status::OK();
}

Tensor Tensor::FromI64(const std::vector<int64_t>& v) {
  Tensor t{DType::kI64, {static_cast<int64_t>(v.size())}, {}};
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(int64_t));
  return t;
}

Tensor Tensor::FromF32(const std::vector<float>& v) {
  Tensor t{DType::kF32, {static_cast<int64_t>(v.size())}, {}};
  t.data.assign(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  return t;
}

std::vector<int64_t> Tensor::ToI64() const {
  std::vector<int64_t> out;
  size_t n = data.size() / DTypeSize(dtype);
  out.reserve(n);
  const char* p = data.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kBool:
      case DType::kU8: out.push_back(Load<uint8_t>(p + i)); break;
      case DType::kI8: out.push_back(Load<int8_t>(p + i)); break;
      case DType::kI16: out.push_back(Load<int16_t>(p + 2 * i)); break;
      case DType::kI32: out.push_back(Load<int32_t>(p + 4 * i)); break;
      case DType::kI64: out.push_back(Load<int64_t>(p + 8 * i)); break;
      case DType::kF32: out.push_back(static_cast<int64_t>(Load<float>(p + 4 * i))); break;
      case DType::kF64: out.push_back(static_cast<int64_t>(Load<double>(p + 8 * i))); break;
      default: out.push_back(0); break;
    }
  }
  return out;
}

std::vector<double> Tensor::ToF64() const {
  std::vector<double> out;
  size_t n = data.size() / DTypeSize(dtype);
  out.reserve(n);
  const char* p = data.data();
  for (size_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::kF32: out.push_back(Load<float>(p + 4 * i)); break;
      case DType::kF64: out.push_back(Load<double>(p + 8 * i)); break;
      case DType::kF16:
      case DType::kBF16: out.push_back(0.0); break;
      default: break;
    }
  }
  if (out.empty() && n > 0 && dtype != DType::kF16 && dtype != DType::kBF16) {
    for (int64_t v : ToI64()) out.push_back(static_cast<double>(v));
  }
  return out;
}

size_t ValueBytes(const Value& v) {
  if (auto* s = std::get_if<std::string>(&v)) return s->size() + 16;
  if (auto* b = std::get_if<Bytes>(&v)) return b->data.size() + 16;
  if (auto* t = std::get_if<Tensor>(&v)) return t->data.size() + 16 + 8 * t->shape.size();
  return 16;
}

const char* ValueTypeName(const Value& v) {
  static const char* names[] = {"null", "bool", "int", "float", "string", "bytes", "tensor"};
  return names[v.index()];
}

const Value* FindColumn(const std::vector<std::pair<std::string, Value>>& columns, std::string_view name) {
  for (const auto& [col, v] : columns) {
    if (col == name) return &v;
  }
  return nullptr;
}

}  // namespace rl
