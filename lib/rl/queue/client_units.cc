// QueueClient with storage units: staging a put's large values on the units, and fetching a
// get's referenced values from them (docs/design.md "Storage units").
#include <algorithm>
#include <cstdlib>
#include <map>
#include <thread>

#include "rl/queue/client.h"
#include "rl/queue/unit_client.h"
#include "rl/queue/unit_ref.h"

namespace rl::queue {
namespace {

constexpr int kMaxStagings = 3;  // a put restaged this often is refused for another reason
constexpr int kMaxGets = 3;      // a get still referring to a freed value this often is an error

std::vector<std::string> Split(const std::string& list) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= list.size()) {
    size_t comma = std::min(list.find(',', from), list.size());
    if (comma > from) out.push_back(list.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

// Runs fn(u) for every unit u with work, the first on this thread and the others on threads of
// their own, so that the calls to different units are in flight together.
template <typename Fn>
void ForUnits(const std::vector<uint32_t>& units, Fn&& fn) {
  std::vector<std::thread> others;
  for (size_t i = 1; i < units.size(); ++i) others.emplace_back([&, u = units[i]] { fn(u); });
  if (!units.empty()) fn(units[0]);
  for (auto& t : others) t.join();
}

// The new rows one unit stages for a put: (row of the put, its columns going to the unit).
struct Staging {
  std::vector<std::pair<size_t, std::vector<size_t>>> picks;
  Result<IndexReply> reply = Status::Internal("not staged");
};

size_t DataBytes(const Value& v) {
  if (const auto* s = std::get_if<std::string>(&v)) return s->size();
  if (const auto* b = std::get_if<Bytes>(&v)) return b->data.size();
  if (const auto* t = std::get_if<Tensor>(&v)) return t->data.size();
  return 0;
}

bool IsStale(const Status& s) {
  return s.code() == Code::kTimeout && s.message().rfind(kStaleStaging, 0) == 0;
}

bool IsFreed(const Status& s) { return s.code() == Code::kNotFound && s.message().rfind(kFreedValue, 0) == 0; }

// The lease of a get reply and the indices of its rows, read from the reply as it came (its
// values may be references, which DecodeGetReply refuses).
Status LeasedRows(const MessageView& reply, uint64_t* lease, std::vector<uint64_t>* indices) {
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(reply.body.data(), reply.body.size()));
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(oh.get(), "get reply"));
  RL_ASSIGN_OR_RETURN(*lease, b.U64("lease", 0));
  const msgpack::object* rows = b.Find("rows");
  if (rows == nullptr || rows->type != msgpack::type::ARRAY) return Status::Protocol("get reply has no rows");
  for (uint32_t r = 0; r < rows->via.array.size; ++r) {
    RL_ASSIGN_OR_RETURN(MapView row, MapView::Of(rows->via.array.ptr[r], "get reply row"));
    RL_ASSIGN_OR_RETURN(uint64_t index, row.U64("index"));
    indices->push_back(index);
  }
  return Status::OK();
}

}  // namespace

QueueClient::~QueueClient() = default;

Result<std::vector<std::string>> QueueClient::Units() {
  if (units_known_) return unit_endpoints_;
  RL_ASSIGN_OR_RETURN(std::optional<std::string> list, MetaGet(kUnitsKey));
  unit_endpoints_ = list ? Split(*list) : std::vector<std::string>();
  if (!unit_endpoints_.empty()) {
    RL_ASSIGN_OR_RETURN(std::optional<std::string> min, MetaGet(kUnitMinBytesKey));
    char* end = nullptr;
    unsigned long long n = min ? std::strtoull(min->c_str(), &end, 10) : kLendBytes;
    if (min && (min->empty() || *end != '\0' || n < 1)) {
      return Status::Protocol("queue.unit_min_bytes is not a size: '" + *min + "'");
    }
    unit_min_bytes_ = static_cast<size_t>(n);
  }
  for (const auto& endpoint : unit_endpoints_) {
    ClientOptions o = options_;
    o.endpoint = endpoint;
    o.sender = options_.sender.empty() ? "" : options_.sender + "/unit";
    units_.push_back(std::make_unique<UnitClient>(std::move(o)));
  }
  units_known_ = true;
  return unit_endpoints_;
}

Result<Message> QueueClient::CallPut(const PutRequest& req, const uint64_t* rid) {
  for (int attempt = 1;; ++attempt) {
    RL_ASSIGN_OR_RETURN(Message m, StagePut(req));
    auto reply = rid ? client_.CallWithRid(*rid, Op::kPut, std::move(m.body), std::move(m.blobs))
                     : client_.Call(Op::kPut, std::move(m.body), std::move(m.blobs));
    if (reply.ok() || attempt == kMaxStagings || !IsStale(reply.status())) return reply;
  }
}

// Rows that name an index keep their values on unit index % units; new rows are spread evenly.
// The units must hold the values durably before the controller's put makes the rows ready.
Result<Message> QueueClient::StagePut(const PutRequest& req) {
  RL_ASSIGN_OR_RETURN(std::vector<std::string> endpoints, Units());
  if (endpoints.empty()) return EncodePut(req);
  std::vector<Staging> staging(endpoints.size());
  for (size_t r = 0; r < req.rows.size(); ++r) {
    const ClientRow& row = req.rows[r];
    std::vector<size_t> cols;
    for (size_t c = 0; c < row.columns.size(); ++c) {
      if (IsUnitValue(row.columns[c].first, row.columns[c].second, unit_min_bytes_)) cols.push_back(c);
    }
    if (cols.empty()) continue;
    Staging& s = staging[(row.index ? *row.index : spread_++) % endpoints.size()];
    s.picks.emplace_back(r, std::move(cols));
  }
  std::vector<uint32_t> busy;
  for (uint32_t u = 0; u < staging.size(); ++u) {
    if (!staging[u].picks.empty()) busy.push_back(u);
  }
  if (busy.empty()) return EncodePut(req);
  ForUnits(busy, [&](uint32_t u) {
    staging[u].reply = units_[u]->Stage(EncodePutPicks(req, staging[u].picks), staging[u].picks.size());
  });
  std::vector<std::vector<std::optional<UnitRef>>> refs(req.rows.size());
  for (uint32_t u : busy) {
    if (!staging[u].reply.ok()) return staging[u].reply.status();
    const IndexReply& rep = *staging[u].reply;
    for (size_t k = 0; k < staging[u].picks.size(); ++k) {
      const auto& [r, cols] = staging[u].picks[k];
      refs[r].resize(req.rows[r].columns.size());
      for (size_t c : cols) {
        const Value& v = req.rows[r].columns[c].second;
        refs[r][c] = UnitRef{u, rep.done[k], rep.staged_ms, DataBytes(v)};
      }
    }
  }
  return EncodePutRefs(req, refs);
}

namespace {

// What one unit is asked for by a get reply's references, and what it answered.
struct Fetch {
  ReadRequest req;
  Result<GetReply> reply = Status::Internal("not read");
  std::map<uint64_t, const GotRow*> rows;
};

// The fetched value a reference stands for, checked against the reference's shell.
Result<const Value*> Fetched(const std::vector<Fetch>& fetches, const Cell& ref, const std::string& column) {
  const Fetch& f = fetches[ref.ref().unit];
  auto it = f.rows.find(ref.ref().row);
  const Value* v = it == f.rows.end() ? nullptr : FindColumn(it->second->columns, column);
  std::string where = "unit " + std::to_string(ref.ref().unit) + " row " + std::to_string(ref.ref().row);
  if (v == nullptr) return Status::NotFound(std::string(kFreedValue) + ": " + where + " has no column '" + column + "'");
  // A unit that lost acknowledged rows (--fsync never) stages new ones under the same numbers.
  const Value* staged = FindColumn(it->second->columns, kStagedColumn);
  const auto* ms = staged ? std::get_if<int64_t>(staged) : nullptr;
  if (ms == nullptr || *ms != ref.ref().staged_ms) {
    return Status::Corruption(where + " is not the row staged at " + std::to_string(ref.ref().staged_ms) +
                              ": the unit lost rows it had acknowledged");
  }
  const auto* t = std::get_if<Tensor>(v);
  const auto* shell = std::get_if<Tensor>(&ref.value());
  bool same = v->index() == ref.value().index() && DataBytes(*v) == ref.ref().bytes &&
              (t == nullptr || (t->dtype == shell->dtype && t->shape == shell->shape));
  if (!same) return Status::Corruption(where + " column '" + column + "' is not the value referred to");
  return v;
}

// Packs `o`, a get reply's body map, with each row's references replaced by their values.
Status Repack(Packer& pk, const msgpack::object& o, const std::vector<Fetch>& fetches, std::vector<std::string>* blobs) {
  pk.pack_map(o.via.map.size);
  for (uint32_t i = 0; i < o.via.map.size; ++i) {
    const auto& kv = o.via.map.ptr[i];
    pk.pack(kv.key);
    bool rows = kv.key.type == msgpack::type::STR && std::string_view(kv.key.via.str.ptr, kv.key.via.str.size) == "rows";
    if (!rows || kv.val.type != msgpack::type::ARRAY) {
      pk.pack(kv.val);
      continue;
    }
    pk.pack_array(kv.val.via.array.size);
    for (uint32_t r = 0; r < kv.val.via.array.size; ++r) {
      const msgpack::object& row = kv.val.via.array.ptr[r];
      if (row.type != msgpack::type::MAP) return Status::Protocol("get reply row is not a map");
      pk.pack_map(row.via.map.size);
      for (uint32_t c = 0; c < row.via.map.size; ++c) {
        const auto& col = row.via.map.ptr[c];
        pk.pack(col.key);
        if (!IsUnitRef(col.val)) {
          pk.pack(col.val);
          continue;
        }
        RL_ASSIGN_OR_RETURN(Cell ref, UnpackUnitRef(col.val));
        RL_ASSIGN_OR_RETURN(std::string name, AsString(col.key, "column name"));
        RL_ASSIGN_OR_RETURN(const Value* v, Fetched(fetches, ref, name));
        PackValue(pk, *v, blobs);
      }
    }
  }
  return Status::OK();
}

// The references in a get reply's rows, as reads of their units.
Status CollectRefs(const msgpack::object& body, size_t units, std::vector<Fetch>* fetches, bool* any) {
  RL_ASSIGN_OR_RETURN(MapView b, MapView::Of(body, "get reply"));
  const msgpack::object* rows = b.Find("rows");
  if (rows == nullptr || rows->type != msgpack::type::ARRAY) return Status::OK();  // DecodeGetReply says so
  for (uint32_t r = 0; r < rows->via.array.size; ++r) {
    const msgpack::object& row = rows->via.array.ptr[r];
    if (row.type != msgpack::type::MAP) continue;
    for (uint32_t c = 0; c < row.via.map.size; ++c) {
      const auto& col = row.via.map.ptr[c];
      if (!IsUnitRef(col.val)) continue;
      RL_ASSIGN_OR_RETURN(Cell ref, UnpackUnitRef(col.val));
      RL_ASSIGN_OR_RETURN(std::string name, AsString(col.key, "column name"));
      if (ref.ref().unit >= units) return Status::Protocol("get reply refers to unit " + std::to_string(ref.ref().unit));
      ReadRequest& req = (*fetches)[ref.ref().unit].req;
      if (req.indices.empty() || req.indices.back() != ref.ref().row) req.indices.push_back(ref.ref().row);
      if (req.columns.empty()) req.columns.push_back(kStagedColumn);  // checked against the reference's
      if (std::find(req.columns.begin(), req.columns.end(), name) == req.columns.end()) req.columns.push_back(name);
      *any = true;
    }
  }
  return Status::OK();
}

}  // namespace

Status QueueClient::RetryAfterFreed(const std::string& task, const MessageView& reply, const Status& why, int attempt) {
  if (!IsFreed(why)) return why;
  uint64_t lease = 0;
  std::vector<uint64_t> indices;
  RL_RETURN_IF_ERROR(LeasedRows(reply, &lease, &indices));
  // Rows of a lease that ran out are refused here (IndexReply::rejected); any still held go back.
  if (lease != 0 && !indices.empty()) RL_RETURN_IF_ERROR(Nack(task, lease, indices).status());
  return attempt >= kMaxGets ? why : Status::OK();
}

Result<std::optional<Message>> QueueClient::ResolveRefs(const MessageView& reply) {
  RL_ASSIGN_OR_RETURN(std::vector<std::string> endpoints, Units());
  if (endpoints.empty()) return std::optional<Message>();
  RL_ASSIGN_OR_RETURN(msgpack::object_handle oh, ParseMsgpack(reply.body.data(), reply.body.size()));
  std::vector<Fetch> fetches(endpoints.size());
  bool any = false;
  RL_RETURN_IF_ERROR(CollectRefs(oh.get(), endpoints.size(), &fetches, &any));
  if (!any) return std::optional<Message>();
  std::vector<uint32_t> busy;
  for (uint32_t u = 0; u < fetches.size(); ++u) {
    if (!fetches[u].req.indices.empty()) busy.push_back(u);
  }
  ForUnits(busy, [&](uint32_t u) { fetches[u].reply = units_[u]->Read(fetches[u].req); });
  for (uint32_t u : busy) {
    if (!fetches[u].reply.ok()) return fetches[u].reply.status();
    for (const GotRow& row : fetches[u].reply->rows) fetches[u].rows[row.index] = &row;
  }
  Message out;
  out.header = reply.header;
  out.blobs.assign(reply.blobs.begin(), reply.blobs.end());  // frame numbers of the reply stay
  msgpack::sbuffer buf(reply.body.size() + 1024);
  Packer pk(buf);
  RL_RETURN_IF_ERROR(Repack(pk, oh.get(), fetches, &out.blobs));
  out.body.assign(buf.data(), buf.size());
  return std::optional<Message>(std::move(out));
}

}  // namespace rl::queue
