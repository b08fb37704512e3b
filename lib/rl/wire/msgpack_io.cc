#include "rl/wire/msgpack_io.h"

#include <cstring>

namespace rl {

std::optional<double> AnyNumber(const msgpack::object& o) {
  switch (o.type) {
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return o.via.f64;
    case msgpack::type::POSITIVE_INTEGER: return static_cast<double>(o.via.u64);
    case msgpack::type::NEGATIVE_INTEGER: return static_cast<double>(o.via.i64);
    default: return std::nullopt;
  }
}
namespace {

constexpr size_t kMaxTensorDims = 8;

std::string TensorExtHeader(DType dtype, const std::vector<int64_t>& shape) {
  std::string h;
  h.push_back(static_cast<char>(dtype));
  h.push_back(static_cast<char>(shape.size()));
  for (int64_t d : shape) h.append(reinterpret_cast<const char*>(&d), 8);
  return h;
}

// The tensor's dtype and shape; *data points at its bytes, in the ext or in a frame.
Result<Tensor> DecodeTensorExt(const msgpack::object_ext& ext, const std::vector<std::string>* frames,
                               std::string_view* data) {
  const char* p = ext.data();
  size_t n = ext.size;
  if (n < 2) return Status::Protocol("tensor ext shorter than its header");
  uint8_t dtype = static_cast<uint8_t>(p[0]);
  uint8_t ndim = static_cast<uint8_t>(p[1]);
  if (dtype >= kDTypeCount) return Status::Protocol("tensor dtype " + std::to_string(dtype) + " unknown");
  if (ndim > kMaxTensorDims) return Status::Protocol("tensor with " + std::to_string(ndim) + " dimensions");
  size_t head = 2 + 8 * size_t{ndim};
  if (n < head) return Status::Protocol("tensor ext shorter than its shape");
  Tensor t;
  t.dtype = static_cast<DType>(dtype);
  t.shape.resize(ndim);
  if (ndim) std::memcpy(t.shape.data(), p + 2, 8 * size_t{ndim});
  if (ext.type() == kExtTensorInline) {
    *data = std::string_view(p + head, n - head);
  } else {
    if (n != head + 4) return Status::Protocol("tensor frame reference is not 4 bytes");
    uint32_t frame;
    std::memcpy(&frame, p + head, 4);
    if (frames == nullptr || frame >= frames->size()) {
      return Status::Protocol("tensor refers to frame " + std::to_string(frame) + " which is absent");
    }
    *data = (*frames)[frame];
  }
  Status s = t.ValidateFor(data->size());
  if (!s.ok()) return Status::Protocol(s.message());
  return t;
}

}  // namespace

// msgpack-c's pack_double writes a whole-number double as an integer (1.0 as 1, 1e19 as a
// uint64 above int64), which would change a value's type on the way. This always writes
// float 64 (0xcb, 8 bytes big-endian); pack_str_body is a raw append of bytes.
namespace {

template <typename P>
void PackFloat64To(P& pk, double d) {
  uint64_t bits;
  std::memcpy(&bits, &d, 8);
  char buf[9];
  buf[0] = static_cast<char>(0xcb);
  for (int i = 0; i < 8; ++i) buf[1 + i] = static_cast<char>(bits >> (56 - 8 * i));
  pk.pack_str_body(buf, 9);
}

template <typename P>
void PackStringTo(P& pk, std::string_view s) {
  pk.pack_str(static_cast<uint32_t>(s.size()));
  pk.pack_str_body(s.data(), static_cast<uint32_t>(s.size()));
}

template <typename P>
void PackTensorHeadTo(P& pk, DType dtype, const std::vector<int64_t>& shape, size_t data_bytes) {
  std::string head = TensorExtHeader(dtype, shape);
  pk.pack_ext(head.size() + data_bytes, kExtTensorInline);
  pk.pack_ext_body(head.data(), static_cast<uint32_t>(head.size()));
}

template <typename P>
void PackTensorTo(P& pk, DType dtype, const std::vector<int64_t>& shape, std::string_view data,
                  std::vector<std::string>* frames) {
  std::string head = TensorExtHeader(dtype, shape);
  if (frames != nullptr && data.size() >= kFrameTensorBytes) {
    uint32_t frame = static_cast<uint32_t>(frames->size());
    frames->emplace_back(data);
    head.append(reinterpret_cast<const char*>(&frame), 4);
    pk.pack_ext(head.size(), kExtTensorFrame);
    pk.pack_ext_body(head.data(), static_cast<uint32_t>(head.size()));
    return;
  }
  PackTensorHeadTo(pk, dtype, shape, data.size());
  pk.pack_ext_body(data.data(), static_cast<uint32_t>(data.size()));
}

template <typename P>
void PackValueTo(P& pk, const Value& v, std::vector<std::string>* frames) {
  switch (v.index()) {
    case 0: pk.pack_nil(); return;
    case 1: std::get<bool>(v) ? pk.pack_true() : pk.pack_false(); return;
    case 2: pk.pack_int64(std::get<int64_t>(v)); return;
    case 3: PackFloat64To(pk, std::get<double>(v)); return;
    case 4: PackStringTo(pk, std::get<std::string>(v)); return;
    case 5: {
      const auto& b = std::get<Bytes>(v).data;
      pk.pack_bin(static_cast<uint32_t>(b.size()));
      pk.pack_bin_body(b.data(), static_cast<uint32_t>(b.size()));
      return;
    }
    default: break;
  }
  const Tensor& t = std::get<Tensor>(v);
  PackTensorTo(pk, t.dtype, t.shape, t.data, frames);
}

}  // namespace

void PackTensorHead(Packer& pk, DType dtype, const std::vector<int64_t>& shape, size_t data_bytes) {
  PackTensorHeadTo(pk, dtype, shape, data_bytes);
}

void PackTensor(Packer& pk, DType dtype, const std::vector<int64_t>& shape, std::string_view data,
                std::vector<std::string>* frames) {
  PackTensorTo(pk, dtype, shape, data, frames);
}

void PackFloat64(Packer& pk, double d) { PackFloat64To(pk, d); }
void PackString(Packer& pk, std::string_view s) { PackStringTo(pk, s); }
void PackString(StringPacker& pk, std::string_view s) { PackStringTo(pk, s); }
void PackValue(Packer& pk, const Value& v, std::vector<std::string>* frames) { PackValueTo(pk, v, frames); }
void PackValue(StringPacker& pk, const Value& v, std::vector<std::string>* frames) { PackValueTo(pk, v, frames); }

Result<Value> UnpackValue(const msgpack::object& o, const std::vector<std::string>* frames) {
  std::string_view bytes;
  RL_ASSIGN_OR_RETURN(Value v, UnpackValueShell(o, frames, &bytes));
  FillValueBytes(v, bytes);
  return v;
}

void FillValueBytes(Value& shell, std::string_view bytes) {
  if (auto* s = std::get_if<std::string>(&shell)) {
    s->assign(bytes);
  } else if (auto* b = std::get_if<Bytes>(&shell)) {
    b->data.assign(bytes);
  } else if (auto* t = std::get_if<Tensor>(&shell)) {
    t->data.assign(bytes);
  }
}

Result<Value> UnpackValueShell(const msgpack::object& o, const std::vector<std::string>* frames,
                               std::string_view* bytes) {
  *bytes = std::string_view();
  switch (o.type) {
    case msgpack::type::NIL: return Value{};
    case msgpack::type::BOOLEAN: return Value{o.via.boolean};
    case msgpack::type::POSITIVE_INTEGER:
      if (o.via.u64 > static_cast<uint64_t>(INT64_MAX)) return Status::DataError("integer above int64");
      return Value{static_cast<int64_t>(o.via.u64)};
    case msgpack::type::NEGATIVE_INTEGER: return Value{o.via.i64};
    case msgpack::type::FLOAT32:
    case msgpack::type::FLOAT64: return Value{o.via.f64};
    case msgpack::type::STR:
      *bytes = std::string_view(o.via.str.ptr, o.via.str.size);
      return Value{std::string()};
    case msgpack::type::BIN:
      *bytes = std::string_view(o.via.bin.ptr, o.via.bin.size);
      return Value{Bytes{}};
    case msgpack::type::EXT: {
      if (o.via.ext.type() != kExtTensorInline && o.via.ext.type() != kExtTensorFrame) {
        return Status::DataError("unknown ext type " + std::to_string(o.via.ext.type()));
      }
      RL_ASSIGN_OR_RETURN(Tensor t, DecodeTensorExt(o.via.ext, frames, bytes));
      return Value{std::move(t)};
    }
    default: return Status::DataError("arrays and maps are not column values");
  }
}

Result<msgpack::object_handle> ParseMsgpack(const char* data, size_t size, size_t max_entries) {
  msgpack::unpack_limit limit(max_entries, max_entries, 1u << 30, 1u << 30, 1u << 30, 8);
  size_t offset = 0;
  try {
    // Strings and blobs reference `data` instead of being copied into the zone: every caller
    // turns the objects into owned values while `data` is alive.
    auto reference = [](msgpack::type::object_type, std::size_t, void*) { return true; };
    msgpack::object_handle oh = msgpack::unpack(data, size, offset, reference, nullptr, limit);
    if (offset != size) return Status::Protocol("trailing bytes after a msgpack document");
    return oh;
  } catch (const std::exception& e) {
    return Status::Protocol(std::string("malformed msgpack: ") + e.what());
  }
}

Result<MapView> MapView::Of(const msgpack::object& o, const std::string& what) {
  if (o.type != msgpack::type::MAP) return Status::Protocol(what + " is not a msgpack map");
  return MapView(&o.via.map);
}

const msgpack::object* MapView::Find(std::string_view key) const {
  for (const auto& kv : *this) {
    if (kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == key) {
      return &kv.val;
    }
  }
  return nullptr;
}

Result<std::string> AsString(const msgpack::object& o, const std::string& what) {
  if (o.type != msgpack::type::STR) return Status::Protocol(what + " is not a string");
  return std::string(o.via.str.ptr, o.via.str.size);
}

Result<uint64_t> AsU64(const msgpack::object& o, const std::string& what) {
  if (o.type != msgpack::type::POSITIVE_INTEGER) return Status::Protocol(what + " is not an unsigned integer");
  return o.via.u64;
}

Result<int64_t> AsI64(const msgpack::object& o, const std::string& what) {
  if (o.type == msgpack::type::NEGATIVE_INTEGER) return o.via.i64;
  if (o.type == msgpack::type::POSITIVE_INTEGER && o.via.u64 <= static_cast<uint64_t>(INT64_MAX)) {
    return static_cast<int64_t>(o.via.u64);
  }
  return Status::Protocol(what + " is not a 64-bit integer");
}

Result<std::string> MapView::Str(std::string_view key) const {
  const msgpack::object* o = Find(key);
  if (!o) return Status::Protocol("missing field '" + std::string(key) + "'");
  return AsString(*o, "field '" + std::string(key) + "'");
}

Result<std::string> MapView::Str(std::string_view key, std::string fallback) const {
  const msgpack::object* o = Find(key);
  if (!o || o->type == msgpack::type::NIL) return fallback;
  return AsString(*o, "field '" + std::string(key) + "'");
}

Result<uint64_t> MapView::U64(std::string_view key) const {
  const msgpack::object* o = Find(key);
  if (!o) return Status::Protocol("missing field '" + std::string(key) + "'");
  return AsU64(*o, "field '" + std::string(key) + "'");
}

Result<uint64_t> MapView::U64(std::string_view key, uint64_t fallback) const {
  const msgpack::object* o = Find(key);
  if (!o || o->type == msgpack::type::NIL) return fallback;
  return AsU64(*o, "field '" + std::string(key) + "'");
}

Result<int64_t> MapView::I64(std::string_view key, int64_t fallback) const {
  const msgpack::object* o = Find(key);
  if (!o || o->type == msgpack::type::NIL) return fallback;
  return AsI64(*o, "field '" + std::string(key) + "'");
}

Result<bool> MapView::Bool(std::string_view key, bool fallback) const {
  const msgpack::object* o = Find(key);
  if (!o || o->type == msgpack::type::NIL) return fallback;
  if (o->type != msgpack::type::BOOLEAN) return Status::Protocol("field '" + std::string(key) + "' is not a bool");
  return o->via.boolean;
}

Result<std::vector<std::string>> MapView::StrList(std::string_view key) const {
  std::vector<std::string> out;
  const msgpack::object* o = Find(key);
  if (!o || o->type == msgpack::type::NIL) return out;
  if (o->type != msgpack::type::ARRAY) return Status::Protocol("field '" + std::string(key) + "' is not an array");
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    RL_ASSIGN_OR_RETURN(std::string s, AsString(o->via.array.ptr[i], std::string(key) + " item"));
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<uint64_t>> MapView::U64List(std::string_view key) const {
  std::vector<uint64_t> out;
  const msgpack::object* o = Find(key);
  if (!o || o->type == msgpack::type::NIL) return out;
  if (o->type != msgpack::type::ARRAY) return Status::Protocol("field '" + std::string(key) + "' is not an array");
  out.reserve(o->via.array.size);
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    RL_ASSIGN_OR_RETURN(uint64_t v, AsU64(o->via.array.ptr[i], std::string(key) + " item"));
    out.push_back(v);
  }
  return out;
}

}  // namespace rl
