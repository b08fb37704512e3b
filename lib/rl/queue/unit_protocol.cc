#include "rl/queue/unit_protocol.h"

#include "rl/queue/record.h"
#include "rl/wire/msgpack_io.h"

namespace rl::queue {
namespace {

std::string Done(const msgpack::sbuffer& buf) { return std::string(buf.data(), buf.size()); }

// A body's fields, a wrong type or a missing field being the client's error (InvalidArgument).
Result<msgpack::object_handle> Parse(std::string_view body) {
  auto oh = ParseMsgpack(body.data(), body.size());
  if (!oh.ok()) return oh.status();
  if (oh->get().type != msgpack::type::MAP) return Status::Protocol("body is not a msgpack map");
  return oh;
}

Status Invalid(const Status& s) { return s.code() == Code::kProtocol ? Status::InvalidArgument(s.message()) : s; }

Result<std::vector<uint64_t>> Indices(const MapView& b, const char* key) {
  if (b.Find(key) == nullptr) return Status::InvalidArgument(std::string("needs an array '") + key + "'");
  auto v = b.U64List(key);
  if (!v.ok()) return Invalid(v.status());
  if (v->size() > kMaxUnitIndices) return Status::InvalidArgument(std::string("over 2^20 ") + key);
  return v;
}

}  // namespace

std::string EncodeRead(const ReadRequest& req) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(2);
  PackString(pk, "indices");
  PackU64List(pk, req.indices);
  PackString(pk, "columns");
  PackStringList(pk, req.columns);
  return Done(buf);
}

std::string EncodeFree(const std::vector<uint64_t>& indices) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(1);
  PackString(pk, "indices");
  PackU64List(pk, indices);
  return Done(buf);
}

std::string EncodeList(const ListRequest& req) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(3);
  PackString(pk, "age_ms");
  pk.pack_int64(req.age_ms);
  PackString(pk, "limit");
  pk.pack_uint64(req.limit);
  PackString(pk, "from");
  pk.pack_uint64(req.from);
  return Done(buf);
}

std::string EncodeHeld(const HeldRequest& req) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(2);
  PackString(pk, "unit");
  pk.pack_uint32(req.unit);
  PackString(pk, "indices");
  PackU64List(pk, req.indices);
  return Done(buf);
}

Result<ReadRequest> DecodeRead(std::string_view body) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(body));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "read body"));
  ReadRequest req;
  RL_ASSIGN_OR_RETURN(req.indices, Indices(b, "indices"));
  auto cols = b.StrList("columns");
  if (!cols.ok()) return Invalid(cols.status());
  if (cols->empty()) return Status::InvalidArgument("read names no columns");
  req.columns = std::move(*cols);
  return req;
}

Result<std::vector<uint64_t>> DecodeFree(std::string_view body) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(body));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "free body"));
  return Indices(b, "indices");
}

Result<ListRequest> DecodeList(std::string_view body) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(body));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "list body"));
  ListRequest req;
  auto age = b.I64("age_ms", 0);
  auto limit = b.U64("limit", req.limit);
  auto from = b.U64("from", 0);
  if (!age.ok()) return Invalid(age.status());
  if (!limit.ok()) return Invalid(limit.status());
  if (!from.ok()) return Invalid(from.status());
  req.from = *from;
  if (*age < 0) return Status::InvalidArgument("age_ms is negative");
  req.age_ms = *age;
  req.limit = std::min<uint64_t>(*limit, kMaxUnitIndices);
  return req;
}

Result<HeldRequest> DecodeHeld(std::string_view body) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(body));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "held body"));
  HeldRequest req;
  auto unit = b.U64("unit");
  if (!unit.ok()) return Invalid(unit.status());
  if (*unit > UINT32_MAX) return Status::InvalidArgument("unit out of range");
  req.unit = static_cast<uint32_t>(*unit);
  RL_ASSIGN_OR_RETURN(req.indices, Indices(b, "indices"));
  return req;
}

std::string EncodeListReply(const ListReply& r) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(2);
  PackString(pk, "indices");
  PackU64List(pk, r.indices);
  PackString(pk, "now_ms");
  pk.pack_int64(r.now_ms);
  return Done(buf);
}

Result<ListReply> DecodeListReply(std::string_view body) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(body));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "list reply"));
  ListReply r;
  RL_ASSIGN_OR_RETURN(r.indices, b.U64List("indices"));
  RL_ASSIGN_OR_RETURN(r.now_ms, b.I64("now_ms", 0));
  return r;
}

std::string EncodeHeldReply(const std::vector<uint64_t>& held) {
  msgpack::sbuffer buf;
  Packer pk(buf);
  pk.pack_map(1);
  PackString(pk, "held");
  PackU64List(pk, held);
  return Done(buf);
}

Result<std::vector<uint64_t>> DecodeHeldReply(std::string_view body) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, Parse(body));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "held reply"));
  return b.U64List("held");
}

}  // namespace rl::queue
