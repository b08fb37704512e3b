#include "rl/wire/json_value.h"

#include <climits>
#include <cstring>

#include "rl/core/json_shape.h"

namespace rl {
namespace {

template <typename T>
void Append(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

Status AppendNumber(std::string* out, DType dtype, const nlohmann::json& x) {
  if (!x.is_number() && !x.is_boolean()) return Status::DataError("tensor data holds a non-number");
  double d = x.is_boolean() ? (x.get<bool>() ? 1.0 : 0.0) : x.get<double>();
  bool integral_dtype = dtype != DType::kF32 && dtype != DType::kF64 && dtype != DType::kF16 && dtype != DType::kBF16;
  if (integral_dtype && !x.is_number_integer() && !x.is_boolean()) {
    return Status::DataError(std::string("a ") + DTypeName(dtype) + " tensor holds a non-integer");
  }
  int64_t i = 0;
  if (x.is_boolean()) {
    i = x.get<bool>();
  } else if (x.is_number_unsigned()) {
    if (x.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) return Status::DataError("integer above int64");
    i = static_cast<int64_t>(x.get<uint64_t>());
  } else if (x.is_number_integer()) {
    i = x.get<int64_t>();
  }
  // Integer dtypes by number: bool, u8, i8, i16, i32, i64.
  static const std::pair<int64_t, int64_t> kRange[] = {{0, 1},           {0, 255},  {-128, 127},
                                                       {-32768, 32767},  {INT32_MIN, INT32_MAX},
                                                       {INT64_MIN, INT64_MAX}};
  if (integral_dtype) {
    auto [lo, hi] = kRange[static_cast<int>(dtype)];
    if (i < lo || i > hi) return Status::DataError(std::to_string(i) + " does not fit a " + DTypeName(dtype) + " tensor");
  }
  switch (dtype) {
    case DType::kBool: Append<uint8_t>(out, i != 0); break;
    case DType::kU8: Append<uint8_t>(out, static_cast<uint8_t>(i)); break;
    case DType::kI8: Append<int8_t>(out, static_cast<int8_t>(i)); break;
    case DType::kI16: Append<int16_t>(out, static_cast<int16_t>(i)); break;
    case DType::kI32: Append<int32_t>(out, static_cast<int32_t>(i)); break;
    case DType::kI64: Append<int64_t>(out, i); break;
    case DType::kF32: Append<float>(out, static_cast<float>(d)); break;
    case DType::kF64: Append<double>(out, d); break;
    default: return Status::DataError("f16 and bf16 tensors are given as hex in JSON");
  }
  return Status::OK();
}

std::string ToHex(const std::string& s) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  out.reserve(2 * s.size());
  for (unsigned char c : s) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

Result<std::string> FromHex(const std::string& h) {
  if (h.size() % 2) return Status::DataError("hex string of odd length");
  std::string out;
  auto nib = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  for (size_t i = 0; i < h.size(); i += 2) {
    int a = nib(h[i]), b = nib(h[i + 1]);
    if (a < 0 || b < 0) return Status::DataError("bad hex digit");
    out.push_back(static_cast<char>(a * 16 + b));
  }
  return out;
}

Result<Value> TensorFromArray(const nlohmann::json& j) {
  bool any_float = false;
  for (const auto& x : j) {
    if (!x.is_number()) return Status::DataError("an array value must hold numbers only");
    any_float = any_float || x.is_number_float();
  }
  Tensor t;
  t.dtype = any_float ? DType::kF64 : DType::kI64;
  t.shape = {static_cast<int64_t>(j.size())};
  t.data.reserve(j.size() * 8);
  for (const auto& x : j) RL_RETURN_IF_ERROR(AppendNumber(&t.data, t.dtype, x));
  return Value{std::move(t)};
}

Result<Value> TensorFromObject(const nlohmann::json& j) {
  if (!j["dtype"].is_string() || !j.contains("shape") || !j["shape"].is_array()) {
    return Status::DataError("a tensor object needs \"dtype\" and \"shape\"");
  }
  Tensor t;
  RL_ASSIGN_OR_RETURN(t.dtype, DTypeFromName(j["dtype"].get<std::string>()));
  for (const auto& d : j["shape"]) {
    if (!d.is_number_integer()) return Status::DataError("tensor shape holds a non-integer");
    t.shape.push_back(d.get<int64_t>());
  }
  if (j.contains("hex") && j["hex"].is_string()) {
    RL_ASSIGN_OR_RETURN(t.data, FromHex(j["hex"].get<std::string>()));
  } else if (j.contains("data") && j["data"].is_array()) {
    for (const auto& x : j["data"]) RL_RETURN_IF_ERROR(AppendNumber(&t.data, t.dtype, x));
  } else {
    return Status::DataError("a tensor object needs \"data\" (array) or \"hex\"");
  }
  RL_RETURN_IF_ERROR(t.Validate());
  return Value{std::move(t)};
}

}  // namespace

Result<Value> ValueFromJson(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value{};
    case nlohmann::json::value_t::boolean: return Value{j.get<bool>()};
    case nlohmann::json::value_t::number_integer: return Value{j.get<int64_t>()};
    case nlohmann::json::value_t::number_unsigned: {
      uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Status::DataError("integer above int64");
      return Value{static_cast<int64_t>(u)};
    }
    case nlohmann::json::value_t::number_float: return Value{j.get<double>()};
    case nlohmann::json::value_t::string: return Value{j.get<std::string>()};
    case nlohmann::json::value_t::array: return TensorFromArray(j);
    case nlohmann::json::value_t::object:
      if (j.size() == 1 && j.contains("hex") && j["hex"].is_string()) {
        RL_ASSIGN_OR_RETURN(std::string b, FromHex(j["hex"].get<std::string>()));
        return Value{Bytes{std::move(b)}};
      }
      return TensorFromObject(j);
    default: return Status::DataError("unsupported JSON value");
  }
}

nlohmann::json ValueToJson(const Value& v) {
  switch (v.index()) {
    case 0: return nullptr;
    case 1: return std::get<bool>(v);
    case 2: return std::get<int64_t>(v);
    case 3: return std::get<double>(v);
    case 4: return std::get<std::string>(v);
    case 5: return {{"hex", ToHex(std::get<Bytes>(v).data)}};
    default: break;
  }
  const Tensor& t = std::get<Tensor>(v);
  bool plain = t.shape.size() == 1 && (t.dtype == DType::kI64 || t.dtype == DType::kF64);
  nlohmann::json data = nlohmann::json::array();
  if (t.dtype == DType::kF16 || t.dtype == DType::kBF16) {
    return {{"dtype", DTypeName(t.dtype)}, {"shape", t.shape}, {"hex", ToHex(t.data)}};
  }
  bool is_float = t.dtype == DType::kF32 || t.dtype == DType::kF64;
  if (is_float) {
    for (double d : t.ToF64()) data.push_back(d);
  } else {
    for (int64_t i : t.ToI64()) data.push_back(i);
  }
  if (plain) return data;
  return {{"dtype", DTypeName(t.dtype)}, {"shape", t.shape}, {"data", data}};
}

bool JsonDepthWithin(std::string_view text, int max_depth) {
  return ScanJsonShape(text, max_depth) != JsonShape::kTooDeep;
}

}  // namespace rl
