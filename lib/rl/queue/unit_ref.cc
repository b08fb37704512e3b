#include "rl/queue/unit_ref.h"

#include <cstring>

#include "rl/queue/store.h"

namespace rl::queue {
namespace {

constexpr uint8_t kKindString = 1, kKindBytes = 2, kKindTensor = 3;
constexpr size_t kMaxDims = 8;  // as tensors (msgpack_io.cc)

template <typename T>
void Put(std::string* out, T v) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(v));
}

std::string Payload(const Value& value, const UnitRef& ref) {
  std::string p;
  const Tensor* t = std::get_if<Tensor>(&value);
  p.push_back(static_cast<char>(t ? kKindTensor : std::holds_alternative<Bytes>(value) ? kKindBytes : kKindString));
  p.push_back(static_cast<char>(t ? t->dtype : DType::kBool));
  p.push_back(static_cast<char>(t ? t->shape.size() : 0));
  if (t) {
    for (int64_t d : t->shape) Put(&p, d);
  }
  Put(&p, ref.bytes);
  Put(&p, ref.unit);
  Put(&p, ref.row);
  Put(&p, ref.staged_ms);
  return p;
}

template <typename P>
void PackTo(P& pk, const Value& value, const UnitRef& ref) {
  std::string p = Payload(value, ref);
  pk.pack_ext(p.size(), kExtUnitRef);
  pk.pack_ext_body(p.data(), static_cast<uint32_t>(p.size()));
}

template <typename T>
T Get(const char*& p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  p += sizeof(v);
  return v;
}

}  // namespace

void PackUnitRef(Packer& pk, const Value& value, const UnitRef& ref) { PackTo(pk, value, ref); }
void PackUnitRef(StringPacker& pk, const Value& value, const UnitRef& ref) { PackTo(pk, value, ref); }

bool IsUnitRef(const msgpack::object& o) {
  return o.type == msgpack::type::EXT && o.via.ext.type() == kExtUnitRef;
}

Result<Cell> UnpackUnitRef(const msgpack::object& o) {
  if (!IsUnitRef(o)) return Status::DataError("not a unit reference (ext type 3)");
  const char* p = o.via.ext.data();
  size_t n = o.via.ext.size;
  if (n < 3) return Status::DataError("unit reference shorter than its header");
  uint8_t kind = static_cast<uint8_t>(p[0]), dtype = static_cast<uint8_t>(p[1]), ndim = static_cast<uint8_t>(p[2]);
  if (kind < kKindString || kind > kKindTensor) return Status::DataError("unit reference of kind " + std::to_string(kind));
  if (kind != kKindTensor && (dtype != 0 || ndim != 0)) {
    return Status::DataError("a string or bytes unit reference has dtype 0 and no shape");
  }
  if (dtype >= kDTypeCount) return Status::DataError("unit reference dtype " + std::to_string(dtype) + " unknown");
  if (ndim > kMaxDims) return Status::DataError("unit reference with " + std::to_string(ndim) + " dimensions");
  if (n != 3 + 8 * size_t{ndim} + 28) return Status::DataError("unit reference of " + std::to_string(n) + " bytes");
  const char* q = p + 3;
  Tensor t;
  t.dtype = static_cast<DType>(dtype);
  for (uint8_t i = 0; i < ndim; ++i) t.shape.push_back(Get<int64_t>(q));
  UnitRef ref;
  ref.bytes = Get<uint64_t>(q);
  ref.unit = Get<uint32_t>(q);
  ref.row = Get<uint64_t>(q);
  ref.staged_ms = Get<int64_t>(q);
  if (ref.unit >= kMaxUnits || ref.row > kMaxUnitRow) return Status::DataError("unit reference out of range");
  if (kind == kKindString) return Cell::Ref(std::string(), ref);
  if (kind == kKindBytes) return Cell::Ref(Bytes(), ref);
  if (ref.bytes > (uint64_t{1} << 40)) return Status::DataError("unit reference of over 1 TiB");
  Status s = t.ValidateFor(ref.bytes);
  if (!s.ok()) return Status::DataError("unit reference: " + s.message());
  return Cell::Ref(std::move(t), ref);
}

bool IsUnitValue(const std::string& column, const Value& v, size_t min_bytes) {
  if (column == kGroupColumn) return false;
  if (const auto* s = std::get_if<std::string>(&v)) return !s->empty() && s->size() >= min_bytes;
  if (const auto* b = std::get_if<Bytes>(&v)) return !b->data.empty() && b->data.size() >= min_bytes;
  if (const auto* t = std::get_if<Tensor>(&v)) return !t->data.empty() && t->data.size() >= min_bytes;
  return false;
}

}  // namespace rl::queue
