// msgpack encoding of Values and strict decoding of untrusted msgpack documents.
//
// Tensors are msgpack ext values (man/rl-protocol.7, "Values"):
//   ext type 1 (inline):  u8 dtype, u8 ndim, ndim x i64 LE dims, raw data
//   ext type 2 (in frame): u8 dtype, u8 ndim, ndim x i64 LE dims, u32 LE frame number
// Decoding never throws and never trusts a length: every limit is checked, and a document must
// use all of its bytes.
// Thread safety: functions are reentrant.
#pragma once

#include <msgpack.hpp>

#include <algorithm>
#include <string>
#include <optional>
#include <string_view>
#include <vector>

#include "rl/core/status.h"
#include "rl/wire/value.h"

namespace rl {

using Packer = msgpack::packer<msgpack::sbuffer>;

// A msgpack stream that appends to a std::string, for a body that is sent as a string: packing
// into it (reserved up front) spares the copy out of an sbuffer. *out must outlive the packer.
struct StringSink {
  std::string* out;
  void write(const char* p, size_t n) { out->append(p, n); }
};
using StringPacker = msgpack::packer<StringSink>;

constexpr int8_t kExtTensorInline = 1;
constexpr int8_t kExtTensorFrame = 2;
// Tensors of at least this many bytes travel in their own frame when frames are allowed.
constexpr size_t kFrameTensorBytes = 4096;

// Packs v. When `frames` is not null, large tensors are appended to it and referenced by number.
void PackValue(Packer& pk, const Value& v, std::vector<std::string>* frames);
void PackValue(StringPacker& pk, const Value& v, std::vector<std::string>* frames);
void PackString(Packer& pk, std::string_view s);
void PackString(StringPacker& pk, std::string_view s);
// Always float 64, even for whole numbers.
void PackFloat64(Packer& pk, double d);

// Packs a tensor whose bytes lie anywhere, as PackValue packs a Tensor value.
void PackTensor(Packer& pk, DType dtype, const std::vector<int64_t>& shape, std::string_view data,
                std::vector<std::string>* frames);
// Packs an inline tensor up to its data, which must follow: `data_bytes` raw bytes.
void PackTensorHead(Packer& pk, DType dtype, const std::vector<int64_t>& shape, size_t data_bytes);

// Any msgpack number (integer or float) as a double; nullopt for another type.
std::optional<double> AnyNumber(const msgpack::object& o);

// Decodes one value. `frames` resolves ext type 2 (null: type 2 is an error).
Result<Value> UnpackValue(const msgpack::object& o, const std::vector<std::string>* frames);
// The same, checked the same way, without copying bytes: a string, bytes or tensor value comes
// back with empty data and *bytes views its bytes where they lie (in o's document or in a
// frame); for any other value *bytes is empty.
Result<Value> UnpackValueShell(const msgpack::object& o, const std::vector<std::string>* frames,
                               std::string_view* bytes);
// Gives a string, bytes or tensor value `bytes` as its data (a copy); other values stay as they are.
void FillValueBytes(Value& shell, std::string_view bytes);

// Containers of a message from the wire hold at most this many entries.
constexpr size_t kWireMaxEntries = size_t{1} << 20;
// Parses a whole msgpack document with limits on sizes and depth: containers of up to
// `max_entries` entries, strings and blobs of up to 1 GiB, nesting 8 deep.
// The objects reference `data`: it must outlive the handle.
Result<msgpack::object_handle> ParseMsgpack(const char* data, size_t size, size_t max_entries = kWireMaxEntries);
// For a document the queue wrote itself (a log record, a snapshot: checksummed, and as large as
// the live state, so a snapshot of 2M rows lists 2M): containers as long as the document allows
// (each entry takes a byte at least), which bounds what a claimed length can make the parser
// allocate without limiting the state.
inline Result<msgpack::object_handle> ParseOwnMsgpack(const char* data, size_t size) {
  return ParseMsgpack(data, size, std::max<size_t>(size, 1));
}

// Read-only view of a msgpack map with string keys.
class MapView {
 public:
  static Result<MapView> Of(const msgpack::object& o, const std::string& what);
  const msgpack::object* Find(std::string_view key) const;
  uint32_t size() const { return map_->size; }
  const msgpack::object_kv* begin() const { return map_->ptr; }
  const msgpack::object_kv* end() const { return map_->ptr + map_->size; }

  Result<std::string> Str(std::string_view key) const;
  Result<std::string> Str(std::string_view key, std::string fallback) const;
  Result<uint64_t> U64(std::string_view key) const;
  Result<uint64_t> U64(std::string_view key, uint64_t fallback) const;
  Result<int64_t> I64(std::string_view key, int64_t fallback) const;
  Result<bool> Bool(std::string_view key, bool fallback) const;
  Result<std::vector<std::string>> StrList(std::string_view key) const;
  Result<std::vector<uint64_t>> U64List(std::string_view key) const;

 private:
  explicit MapView(const msgpack::object_map* map) : map_(map) {}
  const msgpack::object_map* map_;
};

Result<std::string> AsString(const msgpack::object& o, const std::string& what);
Result<uint64_t> AsU64(const msgpack::object& o, const std::string& what);
Result<int64_t> AsI64(const msgpack::object& o, const std::string& what);

}  // namespace rl
