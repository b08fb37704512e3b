#include "rl/queue/record.h"

#include <algorithm>
#include <functional>

#include "rl/queue/unit_ref.h"

namespace rl::queue {

void PackU64List(Packer& pk, const std::vector<uint64_t>& v) {
  pk.pack_array(static_cast<uint32_t>(v.size()));
  for (uint64_t x : v) pk.pack_uint64(x);
}

void PackStringList(Packer& pk, const std::vector<std::string>& v) {
  pk.pack_array(static_cast<uint32_t>(v.size()));
  for (const auto& s : v) PackString(pk, s);
}

Result<std::vector<std::pair<std::string, Cell>>> UnpackColumns(const msgpack::object& o) {
  RL_ASSIGN_OR_RETURN(MapView m, MapView::Of(o, "columns"));
  std::vector<std::pair<std::string, Cell>> cols;
  cols.reserve(m.size());
  for (const auto& kv : m) {
    RL_ASSIGN_OR_RETURN(std::string name, AsString(kv.key, "column name"));
    if (IsUnitRef(kv.val)) {
      RL_ASSIGN_OR_RETURN(Cell c, UnpackUnitRef(kv.val));
      cols.emplace_back(std::move(name), std::move(c));
      continue;
    }
    RL_ASSIGN_OR_RETURN(Value v, UnpackValue(kv.val, nullptr));
    cols.emplace_back(std::move(name), std::move(v));
  }
  return cols;
}

std::string EncodeRecord(const Record& r) {
  msgpack::sbuffer buf = EncodeRecordBuffer(r);
  return std::string(buf.data(), buf.size());
}

namespace {

// The bytes r packs to, about; with `lent_out`, leaving out the bytes of lent cells.
size_t EstimateBytes(const Record& r, bool lent_out) {
  size_t estimate = 512 + 8 * (r.indices.size() + r.dropped.size() + r.regenerated.size()) + r.update_task.size();
  for (const auto& c : r.also) estimate += 8 + c.size();
  for (const auto& row : r.rows) {
    estimate += 16;  // msgpack headers: the row's array, index, flag and map
    for (const auto& [name, c] : row.columns) {
      estimate += 16 + name.size() + (lent_out && c.lent() ? 32 : c.MemoryBytes());
    }
  }
  return estimate;
}

// Packs r; each column value goes through pack_value(pk, cell).
template <typename PackValueFn>
void PackRecord(Packer& pk, const Record& r, PackValueFn&& pack_value) {
  // "holder", "also", "optional", "freed", "uniform" and the update's keys only when they say
  // something: a record without them is the same bytes that servers from before them wrote and read.
  bool freed = r.type == RecordType::kRetire;
  bool update = !r.update_task.empty();
  pk.pack_map(17u + (r.holder.empty() ? 0 : 1) + (r.also.empty() ? 0 : 1) + (r.optional ? 1 : 0) + (freed ? 1 : 0) +
              (update ? 2 : 0) + (r.uniform > 0 ? 2 : 0));
  PackString(pk, "t");
  pk.pack_uint8(static_cast<uint8_t>(r.type));
  PackString(pk, "from");
  PackString(pk, r.sender);
  PackString(pk, "rid");
  pk.pack_uint64(r.rid);
  PackString(pk, "task");
  PackString(pk, r.task);
  PackString(pk, "lease");
  pk.pack_uint64(r.lease);
  PackString(pk, "deadline");
  pk.pack_int64(r.deadline_ms);
  PackString(pk, "idx");
  PackU64List(pk, r.indices);
  PackString(pk, "dropped");
  PackU64List(pk, r.dropped);
  PackString(pk, "regen");
  PackU64List(pk, r.regenerated);
  PackString(pk, "rejected");
  PackU64List(pk, r.rejected);
  PackString(pk, "reserved");
  pk.pack_array(static_cast<uint32_t>(r.reserved.size()));
  for (const auto& res : r.reserved) {
    pk.pack_array(2);
    pk.pack_uint64(res.lease);
    PackU64List(pk, res.indices);
  }
  PackString(pk, "takeover");
  r.takeover ? pk.pack_true() : pk.pack_false();
  if (!r.holder.empty()) {
    PackString(pk, "holder");
    PackString(pk, r.holder);
  }
  if (!r.also.empty()) {
    PackString(pk, "also");
    PackStringList(pk, r.also);
  }
  if (r.uniform > 0) {
    PackString(pk, "uniform");
    pk.pack_uint64(r.uniform);
    PackString(pk, "uniform_sum");
    pk.pack_double(r.uniform_sum);
  }
  if (update) {
    PackString(pk, "update_task");
    PackString(pk, r.update_task);
    PackString(pk, "update_lease");
    pk.pack_uint64(r.update_lease);
  }
  PackString(pk, "rows");
  pk.pack_array(static_cast<uint32_t>(r.rows.size()));
  for (const auto& row : r.rows) {
    pk.pack_array(3);
    pk.pack_uint64(row.index);
    row.is_new ? pk.pack_true() : pk.pack_false();
    pk.pack_map(static_cast<uint32_t>(row.columns.size()));
    for (const auto& [name, value] : row.columns) {
      PackString(pk, name);
      pack_value(pk, value);
    }
  }
  PackString(pk, "columns");
  PackStringList(pk, r.columns);
  if (r.optional) {
    PackString(pk, "optional");
    pk.pack_true();
  }
  if (freed) {
    PackString(pk, "freed");
    pk.pack_uint64(r.freed);
  }
  PackString(pk, "key");
  PackString(pk, r.key);
  PackString(pk, "value");
  PackString(pk, r.value);
  PackString(pk, "v");  // record format version
  pk.pack_uint8(1);
}

}  // namespace

msgpack::sbuffer EncodeRecordBuffer(const Record& r) {
  msgpack::sbuffer buf(EstimateBytes(r, false));  // one allocation instead of doubling through large puts
  Packer pk(buf);
  PackRecord(pk, r, [](Packer& p, const Cell& c) { PackCell(p, c, nullptr); });
  return buf;
}

WalPayload EncodeRecordPayload(const Record& r) {
  PiecePacker pp(EstimateBytes(r, true));
  PackRecord(pp.packer(), r, [&](Packer&, const Cell& c) { pp.Pack(c); });
  return std::move(pp).Finish();
}

// A lent cell's bytes become a piece of the payload between two pieces of the packed rest.
void PiecePacker::Pack(const Cell& c) {
  if (!c.lent()) return PackCell(pk_, c, nullptr);
  auto size = static_cast<uint32_t>(c.bytes().size());
  if (const auto* t = std::get_if<Tensor>(&c.value())) {
    PackTensorHead(pk_, t->dtype, t->shape, size);
  } else {
    std::holds_alternative<Bytes>(c.value()) ? pk_.pack_bin(size) : pk_.pack_str(size);
  }
  cuts_.emplace_back(buf_.size(), c.bytes());
  if (holds_.empty() || holds_.back() != c.hold()) holds_.push_back(c.hold());
  lent_ += size;
}

WalPayload PiecePacker::Finish() && {
  WalPayload out;
  size_t owned = buf_.size();
  out.size = owned + lent_;
  out.data.reset(buf_.release());
  if (cuts_.empty()) return out;
  size_t from = 0;
  for (const auto& [at, bytes] : cuts_) {
    if (at > from) out.pieces.emplace_back(out.data.get() + from, at - from);
    out.pieces.push_back(bytes);
    from = at;
  }
  if (owned > from) out.pieces.emplace_back(out.data.get() + from, owned - from);
  out.holds = std::move(holds_);
  return out;
}

namespace {

Result<std::vector<PutRow>> UnpackRows(const msgpack::object* o) {
  std::vector<PutRow> rows;
  if (o == nullptr) return rows;
  if (o->type != msgpack::type::ARRAY) return Status::Corruption("record rows is not an array");
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    const msgpack::object& item = o->via.array.ptr[i];
    if (item.type != msgpack::type::ARRAY || item.via.array.size != 3 ||
        item.via.array.ptr[1].type != msgpack::type::BOOLEAN) {
      return Status::Corruption("record row is not [index, is_new, columns]");
    }
    PutRow row;
    RL_ASSIGN_OR_RETURN(row.index, AsU64(item.via.array.ptr[0], "row index"));
    row.is_new = item.via.array.ptr[1].via.boolean;
    RL_ASSIGN_OR_RETURN(row.columns, UnpackColumns(item.via.array.ptr[2]));
    rows.push_back(std::move(row));
  }
  return rows;
}

Result<std::vector<ReservedLease>> UnpackReserved(const msgpack::object* o) {
  std::vector<ReservedLease> out;
  if (o == nullptr) return out;
  if (o->type != msgpack::type::ARRAY) return Status::Corruption("record reserved is not an array");
  for (uint32_t i = 0; i < o->via.array.size; ++i) {
    const msgpack::object& item = o->via.array.ptr[i];
    if (item.type != msgpack::type::ARRAY || item.via.array.size != 2) {
      return Status::Corruption("reserved lease is not [lease, indices]");
    }
    ReservedLease res;
    RL_ASSIGN_OR_RETURN(res.lease, AsU64(item.via.array.ptr[0], "reserved lease"));
    const msgpack::object& idx = item.via.array.ptr[1];
    if (idx.type != msgpack::type::ARRAY) return Status::Corruption("reserved indices is not an array");
    for (uint32_t k = 0; k < idx.via.array.size; ++k) {
      RL_ASSIGN_OR_RETURN(uint64_t v, AsU64(idx.via.array.ptr[k], "reserved index"));
      res.indices.push_back(v);
    }
    out.push_back(std::move(res));
  }
  return out;
}

// A float64 field (a number of any msgpack kind is taken); 0 when absent.
Result<double> Number(const msgpack::object* o, const char* what) {
  if (o == nullptr) return 0.0;
  if (auto d = AnyNumber(*o)) return *d;
  return Status::Corruption(std::string("record: ") + what + " is not a number");
}

Result<Record> DecodeRecordObject(const msgpack::object& o) {
  RL_ASSIGN_OR_RETURN(MapView m, MapView::Of(o, "record"));
  Record r;
  RL_ASSIGN_OR_RETURN(uint64_t type, m.U64("t"));
  if (type < 1 || type > static_cast<uint64_t>(RecordType::kFree)) {
    return Status::Corruption("unknown record type " + std::to_string(type));
  }
  r.type = static_cast<RecordType>(type);
  RL_ASSIGN_OR_RETURN(r.sender, m.Str("from", ""));
  RL_ASSIGN_OR_RETURN(r.rid, m.U64("rid", 0));
  RL_ASSIGN_OR_RETURN(r.task, m.Str("task", ""));
  RL_ASSIGN_OR_RETURN(r.lease, m.U64("lease", 0));
  RL_ASSIGN_OR_RETURN(r.deadline_ms, m.I64("deadline", 0));
  RL_ASSIGN_OR_RETURN(r.indices, m.U64List("idx"));
  RL_ASSIGN_OR_RETURN(r.dropped, m.U64List("dropped"));
  RL_ASSIGN_OR_RETURN(r.regenerated, m.U64List("regen"));
  RL_ASSIGN_OR_RETURN(r.rejected, m.U64List("rejected"));
  RL_ASSIGN_OR_RETURN(r.reserved, UnpackReserved(m.Find("reserved")));
  RL_ASSIGN_OR_RETURN(r.takeover, m.Bool("takeover", false));
  RL_ASSIGN_OR_RETURN(r.holder, m.Str("holder", ""));
  RL_ASSIGN_OR_RETURN(r.uniform, m.U64("uniform", 0));
  RL_ASSIGN_OR_RETURN(r.uniform_sum, Number(m.Find("uniform_sum"), "uniform_sum"));
  RL_ASSIGN_OR_RETURN(r.also, m.StrList("also"));
  RL_ASSIGN_OR_RETURN(r.update_task, m.Str("update_task", ""));
  RL_ASSIGN_OR_RETURN(r.update_lease, m.U64("update_lease", 0));
  RL_ASSIGN_OR_RETURN(r.rows, UnpackRows(m.Find("rows")));
  RL_ASSIGN_OR_RETURN(r.columns, m.StrList("columns"));
  RL_ASSIGN_OR_RETURN(r.optional, m.Bool("optional", false));
  RL_ASSIGN_OR_RETURN(r.freed, m.U64("freed", 0));
  RL_ASSIGN_OR_RETURN(r.key, m.Str("key", ""));
  RL_ASSIGN_OR_RETURN(r.value, m.Str("value", ""));
  return r;
}

}  // namespace

Result<Record> DecodeRecord(const char* data, size_t size) {
  auto oh = ParseOwnMsgpack(data, size);
  if (!oh.ok()) return Status::Corruption(oh.status().message());
  auto r = DecodeRecordObject(oh->get());
  if (!r.ok()) return Status::Corruption(r.status().message());
  return r;
}

}  // namespace rl::queue
