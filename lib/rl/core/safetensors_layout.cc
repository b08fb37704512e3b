#include "rl/core/safetensors_layout.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include <nlohmann/json.hpp>

#include "rl/core/json_shape.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors I/O assumes a little-endian host");

namespace rl {
namespace {

struct DtypeSize {
  const char* name;
  uint64_t size;
};
constexpr DtypeSize kDtypes[] = {
    {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
    {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1},
};

Status Corrupt(const std::string& what) { return Status::Corruption("safetensors: " + what); }

// Rejects, before parsing, header texts that would make the JSON parser build a huge tree:
// nesting deeper than a valid header needs (object > tensor object > shape array) or an array
// longer than 64 entries.
Status CheckHeaderShape(std::string_view text) {
  switch (ScanJsonShape(text, 3, 64)) {
    case JsonShape::kTooDeep: return Corrupt("header nests too deep");
    case JsonShape::kArrayTooLong: return Corrupt("header has an array longer than 64");
    case JsonShape::kWithin: break;
  }
  return Status::OK();
}

Status ParseMetadata(const nlohmann::json& j, std::map<std::string, std::string>* out) {
  if (!j.is_object()) return Corrupt("__metadata__ is not an object");
  for (const auto& item : j.items()) {
    if (!item.value().is_string()) return Corrupt("__metadata__ value of '" + item.key() + "' is not a string");
    (*out)[item.key()] = item.value().get<std::string>();
  }
  return Status::OK();
}

Result<SafetensorsEntry> ParseEntry(const std::string& name, const nlohmann::json& j) {
  const std::string where = "tensor '" + name + "': ";
  if (!j.is_object() || !j.contains("dtype") || !j.contains("shape") || !j.contains("data_offsets")) {
    return Corrupt(where + "needs dtype, shape and data_offsets");
  }
  SafetensorsEntry e;
  e.name = name;
  const auto& dtype = j.at("dtype");
  uint64_t nbytes = dtype.is_string() ? SafetensorsElementSize(dtype.get_ref<const std::string&>()) : 0;
  if (nbytes == 0) return Corrupt(where + "unknown dtype " + dtype.dump());
  e.dtype = dtype.get<std::string>();
  const auto& shape = j.at("shape");
  if (!shape.is_array()) return Corrupt(where + "shape is not an array");
  for (const auto& dim : shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > (uint64_t{1} << 62)) {
      return Corrupt(where + "bad dimension " + dim.dump());
    }
    e.shape.push_back(static_cast<int64_t>(dim.get<uint64_t>()));
    if (__builtin_mul_overflow(nbytes, dim.get<uint64_t>(), &nbytes)) return Corrupt(where + "size overflows");
  }
  const auto& offsets = j.at("data_offsets");
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return Corrupt(where + "data_offsets must be two non-negative integers");
  }
  e.begin = offsets[0].get<uint64_t>();
  e.end = offsets[1].get<uint64_t>();
  if (e.end < e.begin || e.end - e.begin != nbytes) {
    return Corrupt(where + "data_offsets span " + offsets.dump() + " does not hold " + std::to_string(nbytes) +
                   " bytes");
  }
  return e;
}

// Sorts the entries by offset; their spans must tile [0, data_size) exactly.
Status CheckTiling(std::vector<SafetensorsEntry>* entries, uint64_t data_size) {
  std::sort(entries->begin(), entries->end(), [](const SafetensorsEntry& a, const SafetensorsEntry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t next = 0;
  for (const SafetensorsEntry& e : *entries) {
    if (e.begin != next) {
      return Corrupt("tensor '" + e.name + "' starts at " + std::to_string(e.begin) +
                     (e.begin < next ? ", overlapping the one before" : ", leaving a gap"));
    }
    next = e.end;
  }
  if (next != data_size) {
    return Corrupt("tensors cover " + std::to_string(next) + " of " + std::to_string(data_size) + " data bytes");
  }
  return Status::OK();
}

Status CheckBoolValues(const SafetensorsEntry& e, std::string_view data) {
  if (e.dtype != "BOOL") return Status::OK();
  for (uint64_t i = e.begin; i < e.end; ++i) {
    if (static_cast<unsigned char>(data[i]) > 1) return Corrupt("tensor '" + e.name + "': BOOL byte not 0 or 1");
  }
  return Status::OK();
}

}  // namespace

uint64_t SafetensorsElementSize(std::string_view name) {
  for (const DtypeSize& d : kDtypes) {
    if (name == d.name) return d.size;
  }
  return 0;
}

Result<SafetensorsLayout> ReadSafetensorsLayout(std::string_view bytes) {
  if (bytes.size() < 8) return Corrupt("shorter than the 8-byte header length");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kMaxSafetensorsHeaderBytes) return Corrupt("header length " + std::to_string(n) + " is over the limit");
  if (n > bytes.size() - 8) return Corrupt("header length " + std::to_string(n) + " passes the end of the file");
  const std::string_view header = bytes.substr(8, n);
  if (header.empty() || header.front() != '{') return Corrupt("header is not a JSON object");
  RL_RETURN_IF_ERROR(CheckHeaderShape(header));
  const nlohmann::json j = nlohmann::json::parse(header.begin(), header.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) return Corrupt("header is not a JSON object");
  SafetensorsLayout out;
  out.data_start = 8 + n;
  for (const auto& item : j.items()) {
    if (item.key() == "__metadata__") {
      RL_RETURN_IF_ERROR(ParseMetadata(item.value(), &out.metadata));
    } else {
      RL_ASSIGN_OR_RETURN(SafetensorsEntry e, ParseEntry(item.key(), item.value()));
      out.entries.push_back(std::move(e));
    }
  }
  const std::string_view data = bytes.substr(out.data_start);
  RL_RETURN_IF_ERROR(CheckTiling(&out.entries, data.size()));
  for (const SafetensorsEntry& e : out.entries) RL_RETURN_IF_ERROR(CheckBoolValues(e, data));
  return out;
}

}  // namespace rl
