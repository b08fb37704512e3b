// Store snapshots: the whole state as one msgpack map (man/rl-queue.1, "SNAPSHOT FORMAT").
// Derived state (ready sets, group counters) is not stored: it is rebuilt on load.
#include <algorithm>

#include "rl/queue/store.h"

namespace rl::queue {

// About the bytes the snapshot packs to, leaving out the bytes of lent cells.
size_t Store::SnapshotEstimate() const {
  size_t bytes = 1024;
  for (const auto& [index, row] : rows_) {
    bytes += 32;
    for (const auto& [id, c] : row.cols) bytes += 16 + column_names_[id].size() + (c.lent() ? 48 : c.MemoryBytes());
  }
  for (const auto& [key, g] : groups_) bytes += 16 + key.size() + 9 * g.members.size();
  for (const Task& t : tasks_) {
    for (const auto& [id, lease] : t.leases) bytes += 48 + t.name.size() + lease.holder.size() + 9 * lease.indices.size();
  }
  for (const auto& [k, v] : meta_) bytes += 16 + k.size() + v.size();
  for (const auto& [sender, entry] : last_) bytes += 256 + sender.size() + 9 * entry.second.indices.size();
  return bytes;
}

std::string Store::EncodeSnapshot() const {
  WalPayload p = EncodeSnapshotPayload();
  if (p.pieces.empty()) return std::string(p.data.get(), p.size);
  std::string out;
  out.reserve(p.size);
  for (std::string_view piece : p.pieces) out.append(piece);
  return out;
}

// The bytes of lent cells stay where they lie: the loop copies none of the stored values.
WalPayload Store::EncodeSnapshotPayload() const {
  PiecePacker pp(SnapshotEstimate());
  Packer& pk = pp.packer();
  pk.pack_map(8);
  PackString(pk, "next_index");
  pk.pack_uint64(next_index_);
  PackString(pk, "next_lease");
  pk.pack_uint64(next_lease_);
  PackString(pk, "tasks");  // [name, [columns], consumed, dropped, optional] in task-id order
  pk.pack_array(static_cast<uint32_t>(tasks_.size()));
  for (const Task& t : tasks_) {
    // Four fields for a required task: what servers before optional tasks read.
    pk.pack_array(t.optional ? 5 : 4);
    PackString(pk, t.name);
    pk.pack_array(static_cast<uint32_t>(t.cols.size()));
    for (uint32_t c : t.cols) PackString(pk, column_names_[c]);
    pk.pack_uint64(t.consumed);
    pk.pack_uint64(t.dropped);
    if (t.optional) pk.pack_true();
  }
  PackString(pk, "rows");  // [index, origin, consumed mask, {columns}], in index order
  std::vector<uint64_t> order;
  order.reserve(rows_.size());
  for (const auto& entry : rows_) order.push_back(entry.first);
  std::sort(order.begin(), order.end());
  pk.pack_array(static_cast<uint32_t>(rows_.size()));
  for (uint64_t index : order) {
    const Row& row = rows_.at(index);
    pk.pack_array(4);
    pk.pack_uint64(index);
    pk.pack_uint32(row.origin);
    pk.pack_uint64(row.consumed);
    pk.pack_map(static_cast<uint32_t>(row.cols.size()));
    for (const auto& [id, c] : row.cols) {
      PackString(pk, column_names_[id]);
      pp.Pack(c);
    }
  }
  PackString(pk, "groups");  // [key, [members]]
  pk.pack_array(static_cast<uint32_t>(groups_.size()));
  for (const auto& [key, g] : groups_) {
    pk.pack_array(2);
    PackString(pk, key);
    PackU64List(pk, g.members);
  }
  PackString(pk, "leases");  // [task, lease, deadline, reserved, [indices], holder]
  size_t n = 0;
  for (const Task& t : tasks_) n += t.leases.size();
  pk.pack_array(static_cast<uint32_t>(n));
  for (const Task& t : tasks_) {
    for (const auto& [id, lease] : t.leases) {
      // Five fields when there is no holder: what servers before holders read.
      pk.pack_array(lease.holder.empty() ? 5 : 6);
      PackString(pk, t.name);
      pk.pack_uint64(id);
      pk.pack_int64(lease.deadline_ms);
      lease.reserved ? pk.pack_true() : pk.pack_false();
      PackU64List(pk, std::vector<uint64_t>(lease.indices.begin(), lease.indices.end()));
      if (!lease.holder.empty()) PackString(pk, lease.holder);
    }
  }
  PackString(pk, "meta");
  pk.pack_map(static_cast<uint32_t>(meta_.size()));
  for (const auto& [k, v] : meta_) {
    PackString(pk, k);
    PackString(pk, v);
  }
  PackString(pk, "last");  // [sender, record bytes]
  pk.pack_array(static_cast<uint32_t>(last_.size()));
  for (const auto& [sender, entry] : last_) {
    std::string rec = EncodeRecord(entry.second);
    pk.pack_array(2);
    PackString(pk, sender);
    pk.pack_bin(static_cast<uint32_t>(rec.size()));
    pk.pack_bin_body(rec.data(), static_cast<uint32_t>(rec.size()));
  }
  return std::move(pp).Finish();
}

namespace {

Result<const msgpack::object_array*> ArrayField(const MapView& m, const char* key) {
  const msgpack::object* o = m.Find(key);
  if (o == nullptr || o->type != msgpack::type::ARRAY) return Status::Corruption(std::string("snapshot field ") + key);
  return &o->via.array;
}

Result<const msgpack::object*> Tuple(const msgpack::object& o, uint32_t size, const char* what) {
  if (o.type != msgpack::type::ARRAY || o.via.array.size != size) {
    return Status::Corruption(std::string("snapshot ") + what + " entry has the wrong shape");
  }
  return o.via.array.ptr;
}

Result<std::vector<uint64_t>> U64Array(const msgpack::object& o) {
  if (o.type != msgpack::type::ARRAY) return Status::Corruption("snapshot list is not an array");
  std::vector<uint64_t> out;
  for (uint32_t i = 0; i < o.via.array.size; ++i) {
    RL_ASSIGN_OR_RETURN(uint64_t v, AsU64(o.via.array.ptr[i], "snapshot index"));
    out.push_back(v);
  }
  return out;
}

}  // namespace

Status Store::LoadSnapshot(const char* data, size_t size) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseOwnMsgpack(data, size));
  RL_ASSIGN_OR_RETURN(MapView m, MapView::Of(oh.get(), "snapshot"));
  *this = Store();
  RL_ASSIGN_OR_RETURN(next_index_, m.U64("next_index"));
  RL_ASSIGN_OR_RETURN(next_lease_, m.U64("next_lease"));
  RL_ASSIGN_OR_RETURN(auto tasks, ArrayField(m, "tasks"));
  for (uint32_t i = 0; i < tasks->size; ++i) {
    // Snapshots written before optional tasks have four fields.
    const msgpack::object& entry = tasks->ptr[i];
    bool has_optional = entry.type == msgpack::type::ARRAY && entry.via.array.size == 5;
    RL_ASSIGN_OR_RETURN(const msgpack::object* f, Tuple(entry, has_optional ? 5 : 4, "task"));
    Record declare;
    declare.type = RecordType::kDeclare;
    if (has_optional) {
      if (f[4].type != msgpack::type::BOOLEAN) return Status::Corruption("task optional flag");
      declare.optional = f[4].via.boolean;
    }
    RL_ASSIGN_OR_RETURN(declare.task, AsString(f[0], "task name"));
    if (f[1].type != msgpack::type::ARRAY) return Status::Corruption("snapshot task columns");
    for (uint32_t c = 0; c < f[1].via.array.size; ++c) {
      RL_ASSIGN_OR_RETURN(std::string col, AsString(f[1].via.array.ptr[c], "task column"));
      declare.columns.push_back(std::move(col));
    }
    ApplyDeclare(declare);
    if (tasks_.size() != i + 1) return Status::Corruption("snapshot task listed twice, or more than 64 tasks");
    RL_ASSIGN_OR_RETURN(tasks_.back().consumed, AsU64(f[2], "task consumed"));
    RL_ASSIGN_OR_RETURN(tasks_.back().dropped, AsU64(f[3], "task dropped"));
  }
  RL_ASSIGN_OR_RETURN(auto groups, ArrayField(m, "groups"));
  for (uint32_t i = 0; i < groups->size; ++i) {
    RL_ASSIGN_OR_RETURN(const msgpack::object* f, Tuple(groups->ptr[i], 2, "group"));
    RL_ASSIGN_OR_RETURN(std::string key, AsString(f[0], "group key"));
    RL_ASSIGN_OR_RETURN(groups_[key].members, U64Array(f[1]));
  }
  RL_ASSIGN_OR_RETURN(auto rows, ArrayField(m, "rows"));
  for (uint32_t i = 0; i < rows->size; ++i) {
    RL_ASSIGN_OR_RETURN(const msgpack::object* f, Tuple(rows->ptr[i], 4, "row"));
    RL_ASSIGN_OR_RETURN(uint64_t index, AsU64(f[0], "row index"));
    if (rows_.count(index)) return Status::Corruption("snapshot row listed twice");
    Row& row = rows_[index];
    RL_ASSIGN_OR_RETURN(uint64_t origin, AsU64(f[1], "row origin"));
    RL_ASSIGN_OR_RETURN(row.consumed, AsU64(f[2], "row consumed"));
    row.consumed &= tasks_.size() >= 64 ? ~uint64_t{0} : (uint64_t{1} << tasks_.size()) - 1;
    for (uint32_t t = 0; t < tasks_.size(); ++t) tasks_[t].unconsumed += row.consumed >> t & 1 ? 0 : 1;
    RL_ASSIGN_OR_RETURN(auto cols, UnpackColumns(f[3]));
    if (origin > cols.size()) return Status::Corruption("row origin beyond its columns");
    row.origin = static_cast<uint32_t>(origin);
    for (auto& [name, v] : cols) {
      uint32_t id = InternColumn(name);
      if (id == group_col_) row.group = GroupKey(v);
      Hold(v);
      row.cols.emplace_back(id, std::move(v));
    }
    if (!row.group.empty()) {
      auto g = groups_.find(row.group);
      if (g == groups_.end()) return Status::Corruption("row in a group the snapshot does not list");
      g->second.live++;
    }
  }
  for (auto& [key, g] : groups_) {
    if (g.members.empty()) return Status::Corruption("snapshot group without members");
    for (uint32_t t = 0; t < tasks_.size(); ++t) {
      for (uint64_t i : g.members) {
        auto r = rows_.find(i);
        if (r == rows_.end() || (r->second.consumed >> t & 1)) tasks_[t].group_counts[key].consumed++;
      }
    }
  }
  RL_ASSIGN_OR_RETURN(auto leases, ArrayField(m, "leases"));
  for (uint32_t i = 0; i < leases->size; ++i) {
    // Snapshots written before leases had holders have five fields.
    const msgpack::object& entry = leases->ptr[i];
    bool has_holder = entry.type == msgpack::type::ARRAY && entry.via.array.size == 6;
    RL_ASSIGN_OR_RETURN(const msgpack::object* f, Tuple(entry, has_holder ? 6 : 5, "lease"));
    RL_ASSIGN_OR_RETURN(std::string task, AsString(f[0], "lease task"));
    RL_ASSIGN_OR_RETURN(uint64_t id, AsU64(f[1], "lease id"));
    RL_ASSIGN_OR_RETURN(int64_t deadline, AsI64(f[2], "lease deadline"));
    if (f[3].type != msgpack::type::BOOLEAN) return Status::Corruption("lease reserved flag");
    RL_ASSIGN_OR_RETURN(auto indices, U64Array(f[4]));
    auto t = task_ids_.find(task);
    if (t == task_ids_.end()) return Status::Corruption("lease of an unknown task");
    std::string holder;
    if (has_holder) {
      RL_ASSIGN_OR_RETURN(holder, AsString(f[5], "lease holder"));
    }
    AddLease(t->second, id, deadline, f[3].via.boolean, holder, indices);
  }
  for (auto& [index, row] : rows_) Refresh(index, row);
  const msgpack::object* meta = m.Find("meta");
  if (meta == nullptr) return Status::Corruption("snapshot without meta");
  RL_ASSIGN_OR_RETURN(MapView mv, MapView::Of(*meta, "meta"));
  for (const auto& kv : mv) {
    RL_ASSIGN_OR_RETURN(std::string k, AsString(kv.key, "meta key"));
    RL_ASSIGN_OR_RETURN(meta_[k], AsString(kv.val, "meta value"));
  }
  RL_ASSIGN_OR_RETURN(auto last, ArrayField(m, "last"));
  for (uint32_t i = 0; i < last->size; ++i) {
    RL_ASSIGN_OR_RETURN(const msgpack::object* f, Tuple(last->ptr[i], 2, "last"));
    RL_ASSIGN_OR_RETURN(std::string sender, AsString(f[0], "sender"));
    if (f[1].type != msgpack::type::BIN) return Status::Corruption("snapshot record is not bytes");
    RL_ASSIGN_OR_RETURN(Record rec, DecodeRecord(f[1].via.bin.ptr, f[1].via.bin.size));
    last_[sender] = {++touch_, std::move(rec)};
  }
  return Status::OK();
}

}  // namespace rl::queue
