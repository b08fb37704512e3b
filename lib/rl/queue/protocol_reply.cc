// Reply bodies of rl-queue (man/rl-protocol.7, "OPERATIONS").
#include "rl/core/clock.h"
#include "rl/queue/protocol.h"

namespace rl::queue {
namespace {

void PackIndexReply(Packer& pk, const char* done_name, const std::vector<uint64_t>& done,
                    const std::vector<uint64_t>& rejected) {
  pk.pack_map(2);
  PackString(pk, done_name);
  PackU64List(pk, done);
  PackString(pk, "rejected");
  PackU64List(pk, rejected);
}

// A get reply's float64 (any msgpack number is taken); 0 when absent.
Result<double> Number(const msgpack::object* o) {
  if (o == nullptr) return 0.0;
  if (auto d = AnyNumber(*o)) return *d;
  return Status::Protocol("get reply: uniform_sum is not a number");
}

// The rows of a get or read reply: an array of maps, "index" first, then the columns.
void PackRows(Packer& pk, const RowsView& view, std::vector<std::string>* blobs) {
  pk.pack_array(static_cast<uint32_t>(view.rows.size()));
  for (const RowsView::Row& row : view.rows) {
    pk.pack_map(static_cast<uint32_t>(row.end - row.begin + 1));
    PackString(pk, kIndexField);
    pk.pack_uint64(row.index);
    for (size_t i = row.begin; i < row.end; ++i) {
      PackString(pk, view.columns[i].name);
      PackCell(pk, *view.columns[i].cell, blobs);
    }
  }
}

// One allocation for the body of a reply of `view`'s rows: one copy of each value.
ReplyBody SizedFor(const RowsView& view) {
  size_t bytes = 128 + 24 * view.rows.size();  // and per row: its map, its index
  for (const auto& [name, c] : view.columns) bytes += 16 + name.size() + c->MemoryBytes();
  ReplyBody m;
  m.body = msgpack::sbuffer(bytes);
  return m;
}

ReplyBody GetReplyFor(const Record& r, const Store& store) {
  RowsView view = store.ViewRows(r.indices, r.task, r.also);
  ReplyBody m = SizedFor(view);
  Packer pk(m.body);
  pk.pack_map(r.uniform > 0 ? 7 : 5);
  PackString(pk, "lease");
  pk.pack_uint64(r.lease);
  PackString(pk, "deadline_ms");
  pk.pack_int64(r.deadline_ms);
  PackString(pk, "dropped");
  pk.pack_uint64(r.dropped.size());
  PackString(pk, "regenerated");
  pk.pack_uint64(r.regenerated.size());
  if (r.uniform > 0) {  // only then: a reply without them is the bytes it was before them
    PackString(pk, "uniform");
    pk.pack_uint64(r.uniform);
    PackString(pk, "uniform_sum");
    pk.pack_double(r.uniform_sum);
  }
  PackString(pk, "rows");
  PackRows(pk, view, &m.blobs);
  return m;
}

}  // namespace

ReplyBody ReadReplyFor(const RowsView& view) {
  ReplyBody m = SizedFor(view);
  Packer pk(m.body);
  pk.pack_map(1);
  PackString(pk, "rows");
  PackRows(pk, view, &m.blobs);
  return m;
}

ReplyBody ReplyFor(const Record& r, const Store& store) {
  if (r.type == RecordType::kLease) return GetReplyFor(r, store);
  ReplyBody m;
  Packer pk(m.body);
  switch (r.type) {
    case RecordType::kPut:
      if (r.update_task.empty() && r.deadline_ms != 0) {  // a storage unit's put: when it staged them
        pk.pack_map(3);
        PackString(pk, "indices");
        PackU64List(pk, r.indices);
        PackString(pk, "rejected");
        PackU64List(pk, {});
        PackString(pk, "staged_ms");
        pk.pack_int64(r.deadline_ms);
        break;
      }
      if (r.update_task.empty()) {
        PackIndexReply(pk, "indices", r.indices, {});
        break;
      }
      // An update also says when its lease ends now: the rollout knows how long its turn may take.
      pk.pack_map(3);
      PackString(pk, "indices");
      PackU64List(pk, r.indices);
      PackString(pk, "rejected");
      PackU64List(pk, {});
      PackString(pk, "deadline_ms");
      pk.pack_int64(r.deadline_ms);
      break;
    case RecordType::kLease: break;
    case RecordType::kAck: PackIndexReply(pk, "acked", r.indices, r.rejected); break;
    case RecordType::kRelease: PackIndexReply(pk, "released", r.indices, r.rejected); break;
    case RecordType::kMetaSet:
      pk.pack_map(1);
      PackString(pk, "value");
      PackString(pk, r.value);
      break;
    case RecordType::kDeclare:
      pk.pack_map(r.optional ? 3 : 2);  // the reply of a required task's declaration is as it was
      PackString(pk, "task");
      PackString(pk, r.task);
      PackString(pk, "columns");
      PackStringList(pk, r.columns);
      if (r.optional) {
        PackString(pk, "optional");
        pk.pack_true();
      }
      break;
    case RecordType::kFree: PackIndexReply(pk, "freed", r.indices, r.rejected); break;
    case RecordType::kRetire:
      pk.pack_map(2);
      PackString(pk, "task");
      PackString(pk, r.task);
      PackString(pk, "freed");
      pk.pack_uint64(r.freed);
      break;
  }
  return m;
}

Result<GetReply> DecodeGetReply(const Message& m) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(m.body.data(), m.body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "get reply"));
  GetReply reply;
  RL_ASSIGN_OR_RETURN(reply.lease, b.U64("lease", 0));
  RL_ASSIGN_OR_RETURN(reply.deadline_ms, b.I64("deadline_ms", 0));
  RL_ASSIGN_OR_RETURN(reply.dropped, b.U64("dropped", 0));
  RL_ASSIGN_OR_RETURN(reply.regenerated, b.U64("regenerated", 0));
  RL_ASSIGN_OR_RETURN(reply.uniform, b.U64("uniform", 0));
  RL_ASSIGN_OR_RETURN(reply.uniform_sum, Number(b.Find("uniform_sum")));
  const msgpack::object* rows = b.Find("rows");
  if (rows == nullptr || rows->type != msgpack::type::ARRAY) return Status::Protocol("get reply without rows");
  for (uint32_t i = 0; i < rows->via.array.size; ++i) {
    RL_ASSIGN_OR_RETURN(MapView rv, MapView::Of(rows->via.array.ptr[i], "row"));
    GotRow row;
    for (const auto& kv : rv) {
      RL_ASSIGN_OR_RETURN(std::string name, AsString(kv.key, "column name"));
      if (name == kIndexField) {
        RL_ASSIGN_OR_RETURN(row.index, AsU64(kv.val, "index"));
        continue;
      }
      RL_ASSIGN_OR_RETURN(Value v, UnpackValue(kv.val, &m.blobs));
      row.columns.emplace_back(std::move(name), std::move(v));
    }
    reply.rows.push_back(std::move(row));
  }
  return reply;
}

Result<GetReplyView> DecodeGetReplyView(Message m) {
  auto held = std::make_shared<const Message>(std::move(m));
  MessageView v{held->header, held->body, {held->blobs.begin(), held->blobs.end()}, held};
  return DecodeGetReplyView(std::move(v));
}

Result<GetReplyView> DecodeGetReplyView(MessageView m) {
  GetReplyView view;
  view.hold = std::move(m.hold);
  view.blobs = std::move(m.blobs);
  std::string_view body = m.body;
  RL_ASSIGN_OR_RETURN(view.doc, ParseMsgpack(body.data(), body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(view.doc.get(), "get reply"));
  RL_ASSIGN_OR_RETURN(view.lease, b.U64("lease", 0));
  RL_ASSIGN_OR_RETURN(view.deadline_ms, b.I64("deadline_ms", 0));
  RL_ASSIGN_OR_RETURN(view.dropped, b.U64("dropped", 0));
  RL_ASSIGN_OR_RETURN(view.regenerated, b.U64("regenerated", 0));
  RL_ASSIGN_OR_RETURN(view.uniform, b.U64("uniform", 0));
  RL_ASSIGN_OR_RETURN(view.uniform_sum, Number(b.Find("uniform_sum")));
  const msgpack::object* rows = b.Find("rows");
  if (rows == nullptr || rows->type != msgpack::type::ARRAY) return Status::Protocol("get reply without rows");
  view.rows.reserve(rows->via.array.size);
  for (uint32_t i = 0; i < rows->via.array.size; ++i) {
    const msgpack::object& row = rows->via.array.ptr[i];
    RL_ASSIGN_OR_RETURN(MapView rv, MapView::Of(row, "row"));
    const msgpack::object* index = rv.Find(kIndexField);
    if (index == nullptr) return Status::Protocol("get reply row without an index");
    GetReplyView::Row r;
    RL_ASSIGN_OR_RETURN(r.index, AsU64(*index, "index"));
    r.columns = &row;
    view.rows.push_back(r);
  }
  return view;
}

Result<IndexReply> DecodeIndexReply(const Message& m) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(m.body.data(), m.body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "reply"));
  IndexReply reply;
  for (const char* name : {"indices", "acked", "released", "freed"}) {
    if (b.Find(name)) {
      RL_ASSIGN_OR_RETURN(reply.done, b.U64List(name));
    }
  }
  RL_ASSIGN_OR_RETURN(reply.rejected, b.U64List("rejected"));
  RL_ASSIGN_OR_RETURN(reply.deadline_ms, b.I64("deadline_ms", 0));
  RL_ASSIGN_OR_RETURN(reply.staged_ms, b.I64("staged_ms", 0));
  return reply;
}

ReplyBody EncodeStatReply(const Store& store, uint64_t log_bytes, uint64_t snapshot_bytes, const std::string& fsync,
                          const std::vector<std::string>& units) {
  ReplyBody m;
  Packer pk(m.body);
  pk.pack_map(units.empty() ? 7 : 8);
  if (!units.empty()) {
    PackString(pk, "units");
    PackStringList(pk, units);
  }
  PackString(pk, "rows");
  pk.pack_uint64(store.live_rows());
  PackString(pk, "bytes");
  pk.pack_uint64(store.live_bytes());
  PackString(pk, "next_index");
  pk.pack_uint64(store.next_index());
  PackString(pk, "log_bytes");
  pk.pack_uint64(log_bytes);
  PackString(pk, "snapshot_bytes");
  pk.pack_uint64(snapshot_bytes);
  PackString(pk, "fsync");
  PackString(pk, fsync);
  PackString(pk, "tasks");
  auto stats = store.Stats();
  pk.pack_array(static_cast<uint32_t>(stats.size()));
  for (const auto& s : stats) {
    pk.pack_map(10);
    PackString(pk, "name");
    PackString(pk, s.name);
    PackString(pk, "columns");
    PackStringList(pk, s.columns);
    PackString(pk, "optional");
    s.optional ? pk.pack_true() : pk.pack_false();
    PackString(pk, "holds");
    pk.pack_uint64(s.holds);
    PackString(pk, "ready");
    pk.pack_uint64(s.ready);
    PackString(pk, "ready_groups");
    pk.pack_uint64(s.ready_groups);
    PackString(pk, "leased");
    pk.pack_uint64(s.leased);
    PackString(pk, "consumed");
    pk.pack_uint64(s.consumed);
    PackString(pk, "dropped");
    pk.pack_uint64(s.dropped);
    PackString(pk, "holders");
    pk.pack_map(static_cast<uint32_t>(s.holders.size()));
    for (const auto& [holder, rows] : s.holders) {
      PackString(pk, holder);
      pk.pack_uint64(rows);
    }
  }
  return m;
}

}  // namespace rl::queue
