// Cell: a column value as the queue holds it, in log records and in the store.
//
// A cell either owns its Value, or, for a string, bytes or tensor value large enough to be worth
// it, lends its bytes from the buffer they arrived in (a put's request frame) and keeps that
// buffer alive: a put's values reach the store and the log without being copied. A lent cell's
// value() is the value without its bytes (the type, and a tensor's dtype and shape); bytes()
// gives them wherever they lie. Everything else (equality, packing, size) treats the two alike.
// A buffer stays in memory while any cell lends from it, so rows put together are freed together.
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

class Cell {
 public:
  Cell() = default;
  Cell(Value v) : value_(std::move(v)) {}  // NOLINT: a value is a cell that owns its bytes
  // `shell`: a std::string, Bytes or Tensor with empty data; `bytes` lie in memory `hold` keeps
  // alive. REQUIRES: hold is not null.
  static Cell Lend(Value shell, std::string_view bytes, std::shared_ptr<const void> hold);

  bool lent() const { return hold_ != nullptr; }
  // The whole value when it is owned; when lent, the value without its bytes.
  const Value& value() const { return value_; }
  // The bytes of a string, bytes or tensor value (empty for other types).
  std::string_view bytes() const;
  const std::shared_ptr<const void>& hold() const { return hold_; }
  // The memory it stands for, as ValueBytes counts a Value.
  size_t MemoryBytes() const;
  // A Value with its own copy of the bytes.
  Value ToValue() const;
  // The owned Value, moved out (a lent cell is copied). The cell is left empty.
  Value TakeValue();

  bool operator==(const Cell& o) const;
  bool operator!=(const Cell& o) const { return !(*this == o); }

 private:
  Value value_;
  std::string_view lent_;
  std::shared_ptr<const void> hold_;
};

// Packs c as PackValue packs its value.
void PackCell(Packer& pk, const Cell& c, std::vector<std::string>* frames);

}  // namespace rl::queue
