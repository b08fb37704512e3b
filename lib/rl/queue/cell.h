// Cell: a column value as the queue holds it, in log records and in the store.
//
// A cell either owns its Value, or, for a string, bytes or tensor value large enough to be worth
// it, lends its bytes from the buffer they arrived in (a put's request frame) and keeps that
// buffer alive: a put's values reach the store and the log without being copied. A lent cell's
// value() is the value without its bytes (the type, and a tensor's dtype and shape); bytes()
// gives them wherever they lie. Everything else (equality, packing, size) treats the two alike.
// A buffer stays in memory while any cell lends from it, so rows put together are freed together.
// A third kind, a reference, is what a controller with storage units holds for a value that lives
// on a unit (UnitRef; encoded as msgpack ext type 3, unit_ref.h): its value() is the shell and its
// bytes are not here at all.
// Thread safety: plain values; copies of a lent cell share its buffer (the count is atomic).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "rl/wire/msgpack_io.h"
#include "rl/wire/value.h"

namespace rl::queue {

// Values of at least this many bytes are lent when they can be, rather than copied.
constexpr size_t kLendBytes = 1024;

// Where a value held by a storage unit lies: row `row` of unit number `unit` (its place in the
// controller's --units list), staged at `staged_ms` by the unit's clock; `bytes` is the length of
// the value's bytes (a string's, a bytes value's, a tensor's data).
struct UnitRef {
  uint32_t unit = 0;
  uint64_t row = 0;
  int64_t staged_ms = 0;
  uint64_t bytes = 0;
  bool operator==(const UnitRef& o) const {
    return unit == o.unit && row == o.row && staged_ms == o.staged_ms && bytes == o.bytes;
  }
};

class Cell {
 public:
  Cell() = default;
  Cell(Value v) : value_(std::move(v)) {}  // NOLINT: a value is a cell that owns its bytes
  // `shell`: a std::string, Bytes or Tensor with empty data; `bytes` lie in memory `hold` keeps
  // alive. REQUIRES: hold is not null.
  static Cell Lend(Value shell, std::string_view bytes, std::shared_ptr<const void> hold);
  // A reference to a value a storage unit holds. `shell`: as for Lend.
  static Cell Ref(Value shell, UnitRef ref);

  bool is_ref() const { return is_ref_; }
  const UnitRef& ref() const { return ref_; }  // REQUIRES: is_ref()
  // The length of the value's bytes, wherever they lie (a reference's on its unit).
  size_t byte_length() const { return is_ref_ ? ref_.bytes : bytes().size(); }

  bool lent() const { return hold_ != nullptr; }
  // The whole value when it is owned; when lent, the value without its bytes.
  const Value& value() const { return value_; }
  // The bytes of a string, bytes or tensor value (empty for other types and for a reference).
  std::string_view bytes() const;
  const std::shared_ptr<const void>& hold() const { return hold_; }
  // The memory it stands for, as ValueBytes counts a Value.
  size_t MemoryBytes() const;
  // A Value with its own copy of the bytes (a reference's shell).
  Value ToValue() const;
  // The owned Value, moved out (a lent cell is copied). The cell is left empty.
  Value TakeValue();

  bool operator==(const Cell& o) const;
  bool operator!=(const Cell& o) const { return !(*this == o); }

 private:
  Value value_;
  std::string_view lent_;
  std::shared_ptr<const void> hold_;
  bool is_ref_ = false;
  UnitRef ref_;
};

// Packs c as PackValue packs its value; a reference as PackUnitRef does.
void PackCell(Packer& pk, const Cell& c, std::vector<std::string>* frames);

}  // namespace rl::queue
