#include "rl/model/safetensors.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <limits>
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

Status Corrupt(const std::string& what) { return Status::Corruption("safetensors: " + what); }

struct Entry {
  std::string name;
  at::ScalarType type;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

// Rejects, before parsing, header texts that would make the JSON parser build a huge tree:
// nesting deeper than a valid header needs (object > tensor object > shape array) or an array
// longer than kMaxArray. Strings are skipped.
Status CheckHeaderShape(std::string_view text) {
  constexpr int kMaxDepth = 3;
  constexpr int64_t kMaxArray = 64;
  bool stack_is_array[kMaxDepth + 1] = {};
  int64_t commas[kMaxDepth + 1] = {};
  int depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxDepth) return Corrupt("header nests too deep");
      stack_is_array[depth] = c == '[';
      commas[depth] = 0;
    } else if (c == '}' || c == ']') {
      depth = std::max(depth - 1, 0);
    } else if (c == ',' && depth > 0 && stack_is_array[depth] && ++commas[depth] >= kMaxArray) {
      return Corrupt("header has an array longer than " + std::to_string(kMaxArray));
    }
  }
  return Status::OK();
}

Result<Metadata> ParseMetadata(const nlohmann::json& j) {
  if (!j.is_object()) return Corrupt("__metadata__ is not an object");
  Metadata m;
  for (const auto& item : j.items()) {
    if (!item.value().is_string())
      return Corrupt("__metadata__ value of '" + item.key() + "' is not a string");
    m[item.key()] = item.value().get<std::string>();
  }
  return m;
}

Result<Entry> ParseEntry(const std::string& name, const nlohmann::json& j) {
  const std::string where = "tensor '" + name + "': ";
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") ||
      !j.contains("data_offsets")) {
    return Corrupt(where + "needs dtype, shape and data_offsets");
  }
  Entry e;
  e.name = name;
  const auto& dtype = j.at("dtype");
  const auto* found = std::find_if(std::begin(kDtypes), std::end(kDtypes), [&](const DtypeName& d) {
    return dtype.is_string() && dtype.get_ref<const std::string&>() == d.name;
  });
  if (found == std::end(kDtypes)) return Corrupt(where + "unknown dtype " + dtype.dump());
  e.type = found->type;
  uint64_t nbytes = at::elementSize(e.type);
  const auto& shape = j.at("shape");
  if (!shape.is_array()) return Corrupt(where + "shape is not an array");
  for (const auto& dim : shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > (uint64_t{1} << 62)) {
      return Corrupt(where + "bad dimension " + dim.dump());
    }
    e.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    if (__builtin_mul_overflow(nbytes, dim.get<uint64_t>(), &nbytes))
      return Corrupt(where + "size overflows");
  }
  const auto& offsets = j.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return Corrupt(where + "data_offsets must be two non-negative integers");
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.end < e.begin || e.end - e.begin != nbytes) {
    return Corrupt(where + "data_offsets span " + offsets.dump() + " does not hold " +
                   std::to_string(nbytes) + " bytes");
  }
  return e;
}

// The spans must tile [0, data_size) exactly.
Status CheckTiling(std::vector<Entry>* entries, uint64_t data_size) {
  std::sort(entries->begin(), entries->end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t next = 0;
  for (const Entry& e : *entries) {
    if (e.begin != next) {
      return Corrupt("tensor '" + e.name + "' starts at " + std::to_string(e.begin) +
                     (e.begin < next ? ", overlapping the one before" : ", leaving a gap"));
    }
    next = e.end;
  }
  if (next != data_size) {
    return Corrupt("tensors cover " + std::to_string(next) + " of " + std::to_string(data_size) +
                   " data bytes");
  }
  return Status::OK();
}

Result<at::Tensor> MakeTensor(const Entry& e, const char* data) {
  if (e.type == at::kBool) {
    for (uint64_t i = e.begin; i < e.end; ++i) {
      if (static_cast<unsigned char>(data[i]) > 1)
        return Corrupt("tensor '" + e.name + "': BOOL byte not 0 or 1");
    }
  }
  return TorchGuard("safetensors: tensor", [&]() -> Result<at::Tensor> {
    at::Tensor t = at::empty(e.shape, at::TensorOptions().dtype(e.type));
    if (e.end > e.begin) std::memcpy(t.data_ptr(), data + e.begin, e.end - e.begin);
    return t;
  });
}

}  // namespace

Result<SafetensorsContents> DecodeSafetensors(std::string_view bytes) {
  if (bytes.size() < 8) return Corrupt("shorter than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxHeaderBytes)
    return Corrupt("header length " + std::to_string(n) + " is over the limit");
  if (n > bytes.size() - 8)
    return Corrupt("header length " + std::to_string(n) + " passes the end of the file");
  const std::string_view header = bytes.substr(8, n);
  if (header.empty() || header.front() != '{') return Corrupt("header is not a JSON object");
  RL_RETURN_IF_ERROR(CheckHeaderShape(header));
  const nlohmann::json j = nlohmann::json::parse(header.begin(), header.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Corrupt("header is not a JSON object");
  SafetensorsContents out;
  std::vector<Entry> entries;
  for (const auto& item : j.items()) {
    if (item.key() == "__metadata__") {
      RL_ASSIGN_OR_RETURN(out.metadata, ParseMetadata(item.value()));
    } else {
      RL_ASSIGN_OR_RETURN(Entry e, ParseEntry(item.key(), item.value()));
      entries.push_back(std::move(e));
    }
  }
  const std::string_view data = bytes.substr(8 + n);
  RL_RETURN_IF_ERROR(CheckTiling(&entries, data.size()));
  for (const Entry& e : entries) {
    RL_ASSIGN_OR_RETURN(at::Tensor t, MakeTensor(e, data.data()));
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
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
