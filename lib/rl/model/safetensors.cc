#include "rl/model/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "rl/core/fs.h"
#include "rl/model/torch_guard.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors I/O assumes a little-endian host");

namespace rl::model {
namespace {

struct DtypeName {
  const char* name;
  at::ScalarType type;
};
constexpr DtypeName kDtypes[] = {
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf},  {"BF16", at::kBFloat16},
    {"I64", at::kLong},   {"I32", at::kInt},   {"I16", at::kShort}, {"I8", at::kChar},
    {"U8", at::kByte},    {"BOOL", at::kBool},
};

const char* NameOf(at::ScalarType t) {
  for (const auto& d : kDtypes) {
    if (d.type == t) return d.name;
  }
  return nullptr;
}

Result<at::ScalarType> TypeOf(const std::string& dtype) {
  for (const auto& d : kDtypes) {
    if (dtype == d.name) return d.type;
  }
  // ReadSafetensorsLayout knows the grammar's dtypes, and kDtypes names them all.
  return Status::Internal("safetensors: no tensor type for dtype " + dtype);
}

}  // namespace

Result<SafetensorsContents> DecodeSafetensors(std::string_view bytes) {
  RL_ASSIGN_OR_RETURN(SafetensorsLayout layout, ReadSafetensorsLayout(bytes));
  return TorchGuard("safetensors: tensor", [&]() -> Result<SafetensorsContents> {
    SafetensorsContents out;
    out.metadata = std::move(layout.metadata);
    const char* data = bytes.data() + layout.data_start;
    for (const SafetensorsEntry& e : layout.entries) {
      RL_ASSIGN_OR_RETURN(at::ScalarType type, TypeOf(e.dtype));
      at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(type));
      if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
      out.tensors.emplace_back(e.name, std::move(t));
    }
    return out;
  });
}

Result<std::string> EncodeSafetensors(const NamedTensors& tensors, const Metadata& metadata) {
  return TorchGuard("safetensors: encode", [&]() -> Result<std::string> {
    nlohmann::json header = nlohmann::json::object();
    if (!metadata.empty()) header["__metadata__"] = metadata;
    std::set<std::string> names;
    std::vector<at::Tensor> parts;
    uint64_t offset = 0;
    for (const auto& [name, tensor] : tensors) {
      if (name == "__metadata__" || !names.insert(name).second) {
        return Status::InvalidArgument("safetensors: tensor name '" + name +
                                       "' is reserved or repeated");
      }
      const char* dtype = tensor.defined() ? NameOf(tensor.scalar_type()) : nullptr;
      if (dtype == nullptr)
        return Status::InvalidArgument("safetensors: tensor '" + name +
                                       "' has an unsupported dtype");
      at::Tensor t = tensor.detach().to(at::kCPU).contiguous();
      const uint64_t nbytes = t.nbytes();
      header[name] = {{"dtype", dtype},
                      {"shape", t.sizes().vec()},
                      {"data_offsets", {offset, offset + nbytes}}};
      offset += nbytes;
      parts.push_back(std::move(t));
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    std::string out(8, '\0');
    const uint64_t n = text.size();
    std::memcpy(out.data(), &n, 8);
    out.reserve(8 + text.size() + offset);
    out += text;
    for (const at::Tensor& t : parts) {
      if (t.nbytes() > 0) out.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
    }
    return out;
  });
}

Status WriteSafetensorsFile(const std::string& path, const NamedTensors& tensors,
                            const Metadata& metadata) {
  RL_ASSIGN_OR_RETURN(std::string bytes, EncodeSafetensors(tensors, metadata));
  return WriteFileAtomic(path, bytes);
}

Result<SafetensorsContents> ReadSafetensorsFile(const std::string& path) {
  RL_ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  auto contents = DecodeSafetensors(bytes);
  if (!contents.ok()) return contents.status().WithContext(path);
  return contents;
}

}  // namespace rl::model
