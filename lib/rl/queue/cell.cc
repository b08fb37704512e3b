#include "rl/queue/cell.h"

#include "rl/queue/unit_ref.h"

namespace rl::queue {
namespace {

// The bytes a value holds itself.
std::string_view OwnBytes(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  if (const auto* b = std::get_if<Bytes>(&v)) return b->data;
  if (const auto* t = std::get_if<Tensor>(&v)) return t->data;
  return {};
}

}  // namespace

Cell Cell::Lend(Value shell, std::string_view bytes, std::shared_ptr<const void> hold) {
  Cell c(std::move(shell));
  c.lent_ = bytes;
  c.hold_ = std::move(hold);
  return c;
}

Cell Cell::Ref(Value shell, UnitRef ref) {
  Cell c(std::move(shell));
  c.is_ref_ = true;
  c.ref_ = ref;
  return c;
}

std::string_view Cell::bytes() const { return lent() ? lent_ : OwnBytes(value_); }

size_t Cell::MemoryBytes() const { return ValueBytes(value_) + (lent() ? lent_.size() : 0); }

Value Cell::ToValue() const {
  Value v = value_;
  if (lent()) FillValueBytes(v, lent_);
  return v;
}

Value Cell::TakeValue() {
  Value v = lent() ? ToValue() : std::move(value_);
  *this = Cell();
  return v;
}

bool Cell::operator==(const Cell& o) const {
  if (is_ref_ || o.is_ref_) return is_ref_ == o.is_ref_ && ref_ == o.ref_ && value_ == o.value_;
  if (!lent() && !o.lent()) return value_ == o.value_;
  if (value_.index() != o.value_.index() || bytes() != o.bytes()) return false;
  const auto* t = std::get_if<Tensor>(&value_);
  const auto* u = std::get_if<Tensor>(&o.value_);
  return t == nullptr || (t->dtype == u->dtype && t->shape == u->shape);
}

void PackCell(Packer& pk, const Cell& c, std::vector<std::string>* frames) {
  if (c.is_ref()) return PackUnitRef(pk, c.value(), c.ref());
  if (!c.lent()) return PackValue(pk, c.value(), frames);
  std::string_view b = c.bytes();
  auto size = static_cast<uint32_t>(b.size());
  if (std::holds_alternative<std::string>(c.value())) {
    pk.pack_str(size);
    pk.pack_str_body(b.data(), size);
  } else if (std::holds_alternative<Bytes>(c.value())) {
    pk.pack_bin(size);
    pk.pack_bin_body(b.data(), size);
  } else {
    const Tensor& t = std::get<Tensor>(c.value());
    PackTensor(pk, t.dtype, t.shape, b, frames);
  }
}

}  // namespace rl::queue
