// The encoding of a reference to a value held by a storage unit (man/rl-protocol.7, "Unit
// references"): msgpack ext type 3, in puts to a controller, in its get replies, in its log and
// its snapshots.
//
//   ext 3: u8 kind (1 string, 2 bytes, 3 tensor) | u8 dtype | u8 ndim | ndim x i64 dims |
//          u64 byte length | u32 unit | u64 unit row | i64 staged_ms        (little-endian)
//
// A string or bytes reference has dtype 0 and ndim 0; a tensor's byte length is its shape's.
// Decoders that take Values (UnpackValue) refuse ext 3 as an unknown type: only a controller
// and the clients that resolve references read it.
// Thread safety: reentrant functions.
#pragma once

#include <cstdint>

#include "rl/core/status.h"
#include "rl/queue/cell.h"
#include "rl/wire/msgpack_io.h"
#include "rl/wire/value.h"

namespace rl::queue {

constexpr int8_t kExtUnitRef = 3;
// Bounds of a reference: a unit row below 2^48 and a unit number below 2^16 pack into one key.
constexpr uint64_t kMaxUnitRow = (uint64_t{1} << 48) - 1;
constexpr uint32_t kMaxUnits = 1024;

// Packs a reference to `value` (only its type, dtype and shape are read; ref.bytes is the length
// of its bytes). REQUIRES: value is a string, bytes or tensor.
void PackUnitRef(Packer& pk, const Value& value, const UnitRef& ref);
void PackUnitRef(StringPacker& pk, const Value& value, const UnitRef& ref);

bool IsUnitRef(const msgpack::object& o);
// The reference as a Cell (Cell::Ref); every length and bound checked, DataError otherwise.
Result<Cell> UnpackUnitRef(const msgpack::object& o);

// Whether a value goes to a storage unit when the queue has units: strings, bytes and tensors of
// at least `min_bytes` bytes (the controller's --unit-min-bytes), except the group column (the
// controller reads it).
bool IsUnitValue(const std::string& column, const Value& v, size_t min_bytes = kLendBytes);

// One number for (unit, row), for sets and maps of references.
inline uint64_t UnitKey(uint32_t unit, uint64_t row) { return uint64_t{unit} << 48 | row; }
inline uint32_t KeyUnit(uint64_t key) { return static_cast<uint32_t>(key >> 48); }
inline uint64_t KeyRow(uint64_t key) { return key & kMaxUnitRow; }

}  // namespace rl::queue
