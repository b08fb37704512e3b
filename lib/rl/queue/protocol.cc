#include "rl/queue/protocol.h"

#include <algorithm>
#include <functional>

#include "rl/queue/unit_ref.h"

namespace rl::queue {
namespace {

std::string Done(msgpack::sbuffer& buf) { return std::string(buf.data(), buf.size()); }

Result<msgpack::object_handle> Parse(std::string_view body) {
  auto oh = ParseMsgpack(body.data(), body.size());
  if (!oh.ok()) return oh.status();
  if (oh->get().type != msgpack::type::MAP) return Status::Protocol("body is not a msgpack map");
  return oh;
}

Status InvalidField(const Status& s) {
  // A wrong type in a body field is the client's error in data, not a broken frame.
  return s.code() == Code::kProtocol ? Status::InvalidArgument(s.message()) : s;
}

}  // namespace

Message EncodePut(const PutRequest& req) { return EncodePutRefs(req, {}); }

Message EncodePutRefs(const PutRequest& req, const std::vector<std::vector<std::optional<UnitRef>>>& refs) {
  Message m;
  size_t bytes = 160 + req.ack_task.size() + req.update_task.size();
  for (const auto& row : req.rows) {
    bytes += 24;
    for (const auto& [name, v] : row.columns) bytes += 16 + name.size() + ValueBytes(v);
  }
  m.body.reserve(bytes);  // one allocation, packed in place: no doubling, no copy out
  StringSink sink{&m.body};
  StringPacker pk(sink);
  // The update's fields only when set: a plain put is the body servers before updates read.
  bool update_lease = !req.update_task.empty() || req.update_lease != 0;
  pk.pack_map(3 + (req.update_task.empty() ? 0 : 1) + (update_lease ? 1 : 0) + (req.renew_ms != 0 ? 1 : 0));
  PackString(pk, "rows");
  pk.pack_array(static_cast<uint32_t>(req.rows.size()));
  for (const auto& row : req.rows) {
    pk.pack_map(static_cast<uint32_t>(row.columns.size() + (row.index ? 1 : 0)));
    if (row.index) {
      PackString(pk, kIndexField);
      pk.pack_uint64(*row.index);
    }
    size_t r = &row - req.rows.data();
    for (size_t c = 0; c < row.columns.size(); ++c) {
      const auto& [name, v] = row.columns[c];
      PackString(pk, name);
      if (r < refs.size() && c < refs[r].size() && refs[r][c]) {
        PackUnitRef(pk, v, *refs[r][c]);
      } else {
        PackValue(pk, v, &m.blobs);
      }
    }
  }
  PackString(pk, "ack_task");
  PackString(pk, req.ack_task);
  PackString(pk, "ack_lease");
  pk.pack_uint64(req.ack_lease);
  if (!req.update_task.empty()) {
    PackString(pk, "update_task");
    PackString(pk, req.update_task);
  }
  if (update_lease) {
    PackString(pk, "update_lease");
    pk.pack_uint64(req.update_lease);
  }
  if (req.renew_ms != 0) {
    PackString(pk, "renew_ms");
    pk.pack_int64(req.renew_ms);
  }
  return m;
}

Message EncodePutPicks(const PutRequest& req, const std::vector<std::pair<size_t, std::vector<size_t>>>& picks) {
  Message m;
  size_t bytes = 64;
  for (const auto& [r, cols] : picks) {
    for (size_t c : cols) bytes += 16 + req.rows[r].columns[c].first.size() + ValueBytes(req.rows[r].columns[c].second);
  }
  m.body.reserve(bytes);
  StringSink sink{&m.body};
  StringPacker pk(sink);
  pk.pack_map(3);
  PackString(pk, "rows");
  pk.pack_array(static_cast<uint32_t>(picks.size()));
  for (const auto& [r, cols] : picks) {
    pk.pack_map(static_cast<uint32_t>(cols.size()));
    for (size_t c : cols) {
      PackString(pk, req.rows[r].columns[c].first);
      PackValue(pk, req.rows[r].columns[c].second, &m.blobs);
    }
  }
  PackString(pk, "ack_task");
  PackString(pk, "");
  PackString(pk, "ack_lease");
  pk.pack_uint64(0);
  return m;
}

std::string EncodePutColumn(std::string_view column, const std::vector<std::string>& values) {
  std::string body;
  EncodePutColumnInto(&body, column, values);
  return body;
}

void EncodePutColumnInto(std::string* body, std::string_view column, const std::vector<std::string>& values) {
  size_t bytes = 64;
  for (const auto& v : values) bytes += 16 + column.size() + v.size();
  body->clear();
  body->reserve(bytes);
  StringSink sink{body};
  StringPacker pk(sink);
  pk.pack_map(3);
  PackString(pk, "rows");
  pk.pack_array(static_cast<uint32_t>(values.size()));
  for (const auto& v : values) {
    pk.pack_map(1);
    PackString(pk, column);
    pk.pack_bin(static_cast<uint32_t>(v.size()));
    pk.pack_bin_body(v.data(), static_cast<uint32_t>(v.size()));
  }
  PackString(pk, "ack_task");
  PackString(pk, "");
  PackString(pk, "ack_lease");
  pk.pack_uint64(0);
}

namespace {

// One column value of a put; with a hold, lent when it is large and lies in `body`.
Result<Cell> DecodeCell(const msgpack::object& o, const std::vector<std::string>& blobs, std::string_view body,
                        const std::shared_ptr<const void>& hold) {
  if (IsUnitRef(o)) return UnpackUnitRef(o);
  std::string_view bytes;
  RL_ASSIGN_OR_RETURN(Value shell, UnpackValueShell(o, &blobs, &bytes));
  bool in_body = !bytes.empty() && std::less_equal<const char*>()(body.data(), bytes.data()) &&
                 std::less_equal<const char*>()(bytes.data() + bytes.size(), body.data() + body.size());
  if (hold && in_body && bytes.size() >= kLendBytes) return Cell::Lend(std::move(shell), bytes, hold);
  FillValueBytes(shell, bytes);
  return Cell(std::move(shell));
}

Result<PutRow> DecodePutRow(const msgpack::object& o, size_t i, const std::vector<std::string>& blobs,
                            std::string_view body, const std::shared_ptr<const void>& hold) {
  std::string where = "row " + std::to_string(i);
  auto rv = MapView::Of(o, where);
  if (!rv.ok()) return InvalidField(rv.status());
  PutRow row;
  row.is_new = true;
  row.columns.reserve(rv->size());
  for (const auto& kv : *rv) {  // messages are made only for errors: this runs for every value put
    if (kv.key.type != msgpack::type::STR) return InvalidField(AsString(kv.key, where + " column name").status());
    std::string name(kv.key.via.str.ptr, kv.key.via.str.size);
    if (name == kIndexField) {
      if (kv.val.type != msgpack::type::POSITIVE_INTEGER) return InvalidField(AsU64(kv.val, where + " index").status());
      row.index = kv.val.via.u64;
      row.is_new = false;
      continue;
    }
    auto c = DecodeCell(kv.val, blobs, body, hold);
    if (!c.ok()) return Status::DataError(where + " column '" + name + "': " + c.status().message());
    row.columns.emplace_back(std::move(name), std::move(*c));
  }
  return row;
}

}  // namespace

Result<PutCommand> DecodePutCommand(std::string_view m, const std::vector<std::string>& blobs,
                                    std::shared_ptr<const void> hold) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(m));
  RL_ASSIGN_OR_RETURN(MapView body, MapView::Of(oh.get(), "put body"));
  PutCommand put;
  auto ack = body.Str("ack_task", "");
  if (!ack.ok()) return InvalidField(ack.status());
  put.ack_task = *ack;
  auto lease = body.U64("ack_lease", 0);
  if (!lease.ok()) return InvalidField(lease.status());
  put.ack_lease = *lease;
  auto update = body.Str("update_task", "");
  if (!update.ok()) return InvalidField(update.status());
  put.update_task = *update;
  auto update_lease = body.U64("update_lease", 0);
  if (!update_lease.ok()) return InvalidField(update_lease.status());
  put.update_lease = *update_lease;
  auto renew = body.I64("renew_ms", 0);
  if (!renew.ok()) return InvalidField(renew.status());
  put.renew_ms = *renew;
  if (!put.update_task.empty() && !put.ack_task.empty()) {
    return Status::InvalidArgument("an update does not consume its rows: update_task and ack_task together");
  }
  if (put.update_task.empty() && (put.update_lease != 0 || put.renew_ms != 0)) {
    return Status::InvalidArgument("update_lease and renew_ms belong to an update: they need update_task");
  }
  const msgpack::object* rows = body.Find("rows");
  if (rows == nullptr || rows->type != msgpack::type::ARRAY) return Status::InvalidArgument("put needs an array 'rows'");
  put.rows.reserve(rows->via.array.size);
  for (uint32_t i = 0; i < rows->via.array.size; ++i) {
    RL_ASSIGN_OR_RETURN(PutRow row, DecodePutRow(rows->via.array.ptr[i], i, blobs, m, hold));
    put.rows.push_back(std::move(row));
  }
  return put;
}

Result<PutRequest> DecodePut(std::string_view m, const std::vector<std::string>& blobs) {
  RL_ASSIGN_OR_RETURN(PutCommand put, DecodePutCommand(m, blobs, nullptr));
  PutRequest req;
  req.ack_task = std::move(put.ack_task);
  req.ack_lease = put.ack_lease;
  req.update_task = std::move(put.update_task);
  req.update_lease = put.update_lease;
  req.renew_ms = put.renew_ms;
  req.rows.reserve(put.rows.size());
  for (PutRow& pr : put.rows) {
    ClientRow row;
    if (!pr.is_new) row.index = pr.index;
    for (auto& [name, c] : pr.columns) {
      if (c.is_ref()) return Status::InvalidArgument("column '" + name + "' is a unit reference, not a value");
      row.columns.emplace_back(std::move(name), c.TakeValue());
    }
    req.rows.push_back(std::move(row));
  }
  return req;
}

namespace {

Status CheckHolder(const std::string& holder) {
  if (holder.size() > kMaxHolderBytes) {
    return Status::InvalidArgument("holder is over " + std::to_string(kMaxHolderBytes) + " bytes");
  }
  return Status::OK();
}

}  // namespace

Message EncodeGet(const GetRequest& req) {
  Message m;
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(12 + (req.holder.empty() ? 0 : 1) + (req.also.empty() ? 0 : 1));
  PackString(pk, "task");
  PackString(pk, req.task);
  if (!req.holder.empty()) {
    PackString(pk, "holder");
    PackString(pk, req.holder);
  }
  if (!req.also.empty()) {
    PackString(pk, "also");
    PackStringList(pk, req.also);
  }
  PackString(pk, "columns");
  PackStringList(pk, req.columns);
  PackString(pk, "count");
  pk.pack_uint32(req.count);
  PackString(pk, "min");
  pk.pack_uint32(req.min);
  PackString(pk, "lease_ms");
  pk.pack_int64(req.lease_ms);
  PackString(pk, "wait_ms");
  pk.pack_int64(req.wait_ms);
  PackString(pk, "groups");
  req.groups ? pk.pack_true() : pk.pack_false();
  PackString(pk, "min_version");
  req.has_min_version ? pk.pack_int64(req.min_version) : pk.pack_nil();
  PackString(pk, "on_stale");
  PackString(pk, req.regenerate_stale ? "regenerate" : "drop");
  PackString(pk, "drop_uniform");
  PackString(pk, req.drop_uniform);
  PackString(pk, "balance");
  PackString(pk, req.balance);
  PackString(pk, "parts");
  pk.pack_uint32(req.parts);
  m.body = Done(buf);
  return m;
}

Result<GetRequest> DecodeGet(std::string_view m) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(m));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "get body"));
  auto decode = [&]() -> Result<GetRequest> {
    GetRequest req;
    RL_ASSIGN_OR_RETURN(req.task, b.Str("task"));
    RL_ASSIGN_OR_RETURN(req.columns, b.StrList("columns"));
    RL_ASSIGN_OR_RETURN(req.also, b.StrList("also"));
    RL_ASSIGN_OR_RETURN(uint64_t count, b.U64("count", 1));
    RL_ASSIGN_OR_RETURN(uint64_t min, b.U64("min", 0));
    RL_ASSIGN_OR_RETURN(uint64_t parts, b.U64("parts", 1));
    if (count > UINT32_MAX || min > UINT32_MAX || parts > UINT32_MAX) return Status::InvalidArgument("count out of range");
    req.count = static_cast<uint32_t>(count);
    req.min = static_cast<uint32_t>(min);
    req.parts = static_cast<uint32_t>(parts);
    RL_ASSIGN_OR_RETURN(req.lease_ms, b.I64("lease_ms", 60000));
    RL_ASSIGN_OR_RETURN(req.wait_ms, b.I64("wait_ms", 0));
    RL_ASSIGN_OR_RETURN(req.groups, b.Bool("groups", false));
    const msgpack::object* mv = b.Find("min_version");
    if (mv && mv->type != msgpack::type::NIL) {
      RL_ASSIGN_OR_RETURN(req.min_version, AsI64(*mv, "min_version"));
      req.has_min_version = true;
    }
    RL_ASSIGN_OR_RETURN(std::string stale, b.Str("on_stale", "drop"));
    if (stale != "drop" && stale != "regenerate") return Status::InvalidArgument("on_stale must be drop or regenerate");
    req.regenerate_stale = stale == "regenerate";
    RL_ASSIGN_OR_RETURN(req.drop_uniform, b.Str("drop_uniform", ""));
    RL_ASSIGN_OR_RETURN(req.balance, b.Str("balance", ""));
    RL_ASSIGN_OR_RETURN(req.holder, b.Str("holder", ""));
    RL_RETURN_IF_ERROR(CheckHolder(req.holder));
    if (req.wait_ms < 0 || req.wait_ms > 3600 * 1000) return Status::InvalidArgument("wait must be 0 to 3600 s");
    return req;
  };
  auto req = decode();
  if (!req.ok()) return InvalidField(req.status());
  return req;
}

Message EncodeIndices(const IndexRequest& req) {
  Message m;
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(req.holder.empty() ? 3 : 4);
  PackString(pk, "task");
  PackString(pk, req.task);
  PackString(pk, "lease");
  pk.pack_uint64(req.lease);
  PackString(pk, "indices");
  PackU64List(pk, req.indices);
  if (!req.holder.empty()) {
    PackString(pk, "holder");
    PackString(pk, req.holder);
  }
  m.body = Done(buf);
  return m;
}

Result<IndexRequest> DecodeIndices(std::string_view m) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(m));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "body"));
  auto decode = [&]() -> Result<IndexRequest> {
    IndexRequest req;
    RL_ASSIGN_OR_RETURN(req.task, b.Str("task"));
    RL_ASSIGN_OR_RETURN(req.lease, b.U64("lease", 0));
    RL_ASSIGN_OR_RETURN(req.indices, b.U64List("indices"));
    RL_ASSIGN_OR_RETURN(req.holder, b.Str("holder", ""));
    RL_RETURN_IF_ERROR(CheckHolder(req.holder));
    const msgpack::object* holder = b.Find("holder");
    if (holder != nullptr && holder->type != msgpack::type::NIL && req.holder.empty()) {
      return Status::InvalidArgument("holder is empty (leave it out to name no holder)");
    }
    if (!req.holder.empty() && (req.lease != 0 || !req.indices.empty())) {
      return Status::InvalidArgument("a nack by holder names no lease and no indices");
    }
    return req;
  };
  auto req = decode();
  if (!req.ok()) return InvalidField(req.status());
  return req;
}

// A body that is one string under one key: meta get {key}, retire {task}.
Message EncodeOneString(const char* name, const std::string& value) {
  Message m;
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(1);
  PackString(pk, name);
  PackString(pk, value);
  m.body = Done(buf);
  return m;
}

Result<std::string> DecodeOneString(std::string_view m, const char* name) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(m));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "body"));
  auto value = b.Str(name);
  if (!value.ok()) return InvalidField(value.status());
  return *value;
}

Message EncodeMetaGet(const std::string& key) { return EncodeOneString("key", key); }

Result<std::string> DecodeMetaGet(std::string_view m) { return DecodeOneString(m, "key"); }

Message EncodeMetaSet(const MetaRequest& req) {
  Message m;
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(3);
  PackString(pk, "key");
  PackString(pk, req.key);
  PackString(pk, "value");
  PackString(pk, req.value);
  PackString(pk, "if_equals");
  if (req.if_equals) {
    PackString(pk, *req.if_equals);
  } else {
    pk.pack_nil();
  }
  m.body = Done(buf);
  return m;
}

Result<MetaRequest> DecodeMetaSet(std::string_view m) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(m));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "body"));
  auto decode = [&]() -> Result<MetaRequest> {
    MetaRequest req;
    RL_ASSIGN_OR_RETURN(req.key, b.Str("key"));
    RL_ASSIGN_OR_RETURN(req.value, b.Str("value"));
    const msgpack::object* ie = b.Find("if_equals");
    if (ie && ie->type != msgpack::type::NIL) {
      RL_ASSIGN_OR_RETURN(std::string v, AsString(*ie, "if_equals"));
      req.if_equals = v;
    }
    return req;
  };
  auto req = decode();
  if (!req.ok()) return InvalidField(req.status());
  return req;
}

Message EncodeDeclare(const DeclareRequest& req) {
  Message m;
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(req.optional ? 3 : 2);  // "optional" only when true: what servers before it read
  PackString(pk, "task");
  PackString(pk, req.task);
  PackString(pk, "columns");
  PackStringList(pk, req.columns);
  if (req.optional) {
    PackString(pk, "optional");
    pk.pack_true();
  }
  m.body = Done(buf);
  return m;
}

Message EncodeRetire(const std::string& task) { return EncodeOneString("task", task); }

Result<std::string> DecodeRetire(std::string_view m) { return DecodeOneString(m, "task"); }

Result<DeclareRequest> DecodeDeclare(std::string_view m) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(m));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "body"));
  auto decode = [&]() -> Result<DeclareRequest> {
    DeclareRequest req;
    RL_ASSIGN_OR_RETURN(req.task, b.Str("task"));
    RL_ASSIGN_OR_RETURN(req.columns, b.StrList("columns"));
    RL_ASSIGN_OR_RETURN(req.optional, b.Bool("optional", false));
    return req;
  };
  auto req = decode();
  if (!req.ok()) return InvalidField(req.status());
  return req;
}

}  // namespace rl::queue
