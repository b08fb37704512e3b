// Store planning: checks a request against the state and returns the Record that carries it out.
#include <algorithm>
#include <unordered_set>

#include "rl/queue/store.h"

namespace rl::queue {
namespace {

constexpr size_t kMaxRowsPerRequest = 1000000;
constexpr size_t kMaxNameBytes = 256;
constexpr uint32_t kMaxCount = 1000000;
constexpr size_t kFewColumns = 16;

Status CheckName(const std::string& what, const std::string& name) {
  if (name.empty()) return Status::InvalidArgument(what + " name is empty");
  if (name.size() > kMaxNameBytes) return Status::InvalidArgument(what + " name longer than 256 bytes");
  return Status::OK();
}

// "row 3", or "row 3 (index 17)" for a row of a put that names an existing row.
std::string RowName(size_t n, const PutRow& pr) {
  std::string s = "row " + std::to_string(n);
  return pr.is_new ? s : s + " (index " + std::to_string(pr.index) + ")";
}

}  // namespace

bool Store::IsStale(const Row& row, int64_t min_version) const {
  const Cell* v = Find(row, version_col_);
  auto* version = v ? std::get_if<int64_t>(&v->value()) : nullptr;
  return version != nullptr && *version < min_version;
}

uint64_t Store::Tokens(const Row& row, uint32_t col) const {
  const Cell* v = Find(row, col);
  if (v == nullptr) return 0;
  if (auto* t = std::get_if<Tensor>(&v->value())) return static_cast<uint64_t>(t->NumElements());
  if (std::holds_alternative<std::string>(v->value())) return v->byte_length();
  return 1;
}

// In the order of rl-protocol(7) "Error precedence": what the request says on its own, then
// what it names exists, then the state allows it. Rows are named by their position in the put.
Result<Record> Store::PlanPut(std::vector<PutRow> rows, const std::string& ack_task, uint64_t ack_lease) const {
  std::vector<std::pair<size_t, std::string>> groups;  // (row, group key) of rows that name one
  const char* acks = ack_task.empty() ? nullptr : "a new row cannot be acked in its own put";
  RL_RETURN_IF_ERROR(CheckPutRows(rows, acks, &groups));
  uint32_t ack_t = UINT32_MAX;
  if (!ack_task.empty()) {
    auto t = task_ids_.find(ack_task);
    if (t == task_ids_.end()) return Status::NotFound("unknown task '" + ack_task + "'");
    ack_t = t->second;
  }
  for (size_t n = 0; n < rows.size(); ++n) {
    if (!rows[n].is_new && !rows_.count(rows[n].index)) {
      return Status::NotFound(RowName(n, rows[n]) + " does not exist (never put, or consumed by every task and freed)");
    }
  }
  for (const auto& [n, key] : groups) {
    if (!rows[n].is_new) return Status::Conflict(RowName(n, rows[n]) + ": 'group' is set when a row is created");
    if (groups_.count(key)) return Status::Conflict("row " + std::to_string(n) + ": group " + key.substr(2) + " already exists");
  }
  Record rec;
  rec.type = RecordType::kPut;
  rec.task = ack_task;
  rec.lease = ack_lease;
  rec.indices.reserve(rows.size());
  uint64_t next = next_index_;
  for (size_t n = 0; n < rows.size(); ++n) {
    PutRow& pr = rows[n];
    if (pr.is_new) {
      pr.index = next++;
    } else {
      RL_RETURN_IF_ERROR(CheckAddTo(pr, n, ack_t, ack_task, ack_lease));
    }
    rec.indices.push_back(pr.index);
  }
  rec.rows = std::move(rows);
  return rec;
}

// A put's rows on their own, the queue's state aside.
Status Store::CheckPutRows(const std::vector<PutRow>& rows, const char* existing_only,
                           std::vector<std::pair<size_t, std::string>>* groups) const {
  if (rows.empty()) return Status::InvalidArgument("put has no rows");
  if (rows.size() > kMaxRowsPerRequest) return Status::TooLarge("put of more than 1000000 rows");
  std::unordered_set<uint64_t> seen;
  for (size_t n = 0; n < rows.size(); ++n) {
    const PutRow& pr = rows[n];
    RL_RETURN_IF_ERROR(CheckPutColumns(pr, n, groups));
    if (pr.is_new && existing_only != nullptr) {
      return Status::InvalidArgument("row " + std::to_string(n) + ": " + existing_only);
    }
    if (!pr.is_new && !seen.insert(pr.index).second) {
      return Status::InvalidArgument(RowName(n, pr) + " named twice in one put");
    }
  }
  return Status::OK();
}

// The columns of row n of a put on their own: names valid and each once, version an integer, group
// an integer or a string (its key goes to *groups). Messages are built only for an error (this
// runs for every row put).
Status Store::CheckPutColumns(const PutRow& pr, size_t n, std::vector<std::pair<size_t, std::string>>* groups) const {
  auto where = [n] { return "row " + std::to_string(n); };
  std::unordered_set<std::string_view> names;  // for rows of many columns; a few are compared in turn
  bool many = pr.columns.size() > kFewColumns;
  for (size_t k = 0; k < pr.columns.size(); ++k) {
    const auto& [name, value] = pr.columns[k];
    if (name.empty() || name.size() > kMaxNameBytes) RL_RETURN_IF_ERROR(CheckName(where() + ": column", name));
    if (name == kIndexField || name == kLeaseField) {
      return Status::InvalidArgument(where() + ": '" + name + "' is reserved, not a column name");
    }
    bool twice = many ? !names.insert(name).second : false;
    for (size_t j = 0; !many && j < k; ++j) twice = twice || pr.columns[j].first == name;
    if (twice) return Status::InvalidArgument(where() + ": column '" + name + "' twice");
    if (name == kVersionColumn && !std::holds_alternative<int64_t>(value.value())) {
      return Status::DataError(where() + " column 'version': must be an integer, not " + ValueTypeName(value.value()));
    }
    if (name == kGroupColumn) {
      std::string key = GroupKey(value);
      if (key.empty()) return Status::DataError(where() + " column 'group': must be an integer or a string");
      groups->emplace_back(n, std::move(key));
    }
  }
  return Status::OK();
}

// Row n of a put that names a live row: the row has none of its columns, and can be acked when asked.
Status Store::CheckAddTo(const PutRow& pr, size_t n, uint32_t ack_t, const std::string& ack_task,
                         uint64_t ack_lease) const {
  const Row& row = rows_.at(pr.index);
  for (const auto& [name, value] : pr.columns) {
    uint32_t id = ColumnId(name);
    if (id != UINT32_MAX && Find(row, id)) return Status::Conflict(RowName(n, pr) + " already has column '" + name + "'");
  }
  if (ack_t != UINT32_MAX) {
    const char* why = nullptr;
    RL_RETURN_IF_ERROR(CheckAckable(ack_t, ack_lease, pr.index, &why));
    if (why) return Status::Conflict(RowName(n, pr) + ": cannot ack for task '" + ack_task + "': " + why);
  }
  return Status::OK();
}

// An update put, in the order of "Error precedence" as PlanPut. The lease's new deadline is decided
// here and logged with the record: Apply must reach the same state when the log is replayed.
Result<Record> Store::PlanUpdate(std::vector<PutRow> rows, const std::string& task, uint64_t lease, int64_t renew_ms,
                                 int64_t now_ms) const {
  RL_RETURN_IF_ERROR(CheckName("update task", task));
  if (lease == 0) return Status::InvalidArgument("an update names the lease that holds its rows: update_lease is 0");
  if (renew_ms < 0 || renew_ms > kMaxRenewMs) {
    return Status::InvalidArgument("renew_ms must be 0 to " + std::to_string(kMaxRenewMs) + " (a year)");
  }
  // Before CheckPutRows: a group or version of the wrong type is still an update writing them
  // (InvalidArgument), not a bad value (DataError), as rl-protocol(7)'s error order says.
  for (size_t n = 0; n < rows.size(); ++n) {
    for (const auto& [name, value] : rows[n].columns) {
      if (name == kGroupColumn || name == kVersionColumn) {
        return Status::InvalidArgument(RowName(n, rows[n]) + ": an update cannot write '" + name +
                                       "': it indexes the row");
      }
    }
  }
  std::vector<std::pair<size_t, std::string>> groups;
  RL_RETURN_IF_ERROR(CheckPutRows(rows, "an update names existing rows only (it adds none)", &groups));
  auto it = task_ids_.find(task);
  if (it == task_ids_.end()) return Status::NotFound("unknown task '" + task + "'");
  for (size_t n = 0; n < rows.size(); ++n) {
    if (!rows_.count(rows[n].index)) {
      return Status::NotFound(RowName(n, rows[n]) + " does not exist (never put, or consumed by every task and freed)");
    }
  }
  for (size_t n = 0; n < rows.size(); ++n) {
    RL_RETURN_IF_ERROR(CheckUpdateRow(rows[n], n, it->second, task, lease, now_ms));
  }
  Record rec;
  rec.type = RecordType::kPut;
  rec.update_task = task;
  rec.update_lease = lease;
  // Unrenewed, the deadline stays what it was (Apply sets it again, to the same value).
  rec.deadline_ms = renew_ms > 0 ? now_ms + renew_ms : tasks_[it->second].leases.at(lease).deadline_ms;
  rec.indices.reserve(rows.size());
  for (const PutRow& pr : rows) rec.indices.push_back(pr.index);
  rec.rows = std::move(rows);
  return rec;
}

// Row n of an update: lease `lease` of task t holds it and has neither expired nor been left
// unclaimed, and the update replaces none of the columns the row was created with.
Status Store::CheckUpdateRow(const PutRow& pr, size_t n, uint32_t t, const std::string& task, uint64_t lease,
                             int64_t now_ms) const {
  const Row& row = rows_.at(pr.index);
  const Task& owner = tasks_[t];
  auto refuse = [&](const std::string& why) {
    return Status::Conflict(RowName(n, pr) + ": not held by lease " + std::to_string(lease) + " of task '" + task +
                            "': " + why);
  };
  auto l = owner.leases.find(lease);
  bool held = std::find(row.leases.begin(), row.leases.end(), std::make_pair(t, lease)) != row.leases.end();
  if (!held || l == owner.leases.end()) {
    if (row.consumed >> t & 1) return refuse("the task consumed it");
    for (const auto& [task_id, other] : row.leases) {
      if (task_id == t) return refuse("lease " + std::to_string(other) + " holds it");
    }
    if (l != owner.leases.end()) return refuse("the lease does not hold it (it was given back)");
    return refuse(lease >= next_lease_ ? "no such lease" : "the lease has ended (expired, given back or acked)");
  }
  if (l->second.reserved) return refuse("the lease is a reserved part that no get has claimed");
  if (l->second.deadline_ms <= now_ms) return refuse("the lease expired");
  for (const auto& [name, value] : pr.columns) {
    uint32_t id = ColumnId(name);
    for (uint32_t k = 0; id != UINT32_MAX && k < row.origin; ++k) {
      if (row.cols[k].first == id) {
        return Status::Conflict(RowName(n, pr) + ": column '" + name +
                                "' was put with the row; an update cannot replace it");
      }
    }
  }
  return Status::OK();
}

Status CheckTaskColumns(const std::string& task, const std::vector<std::string>& columns) {
  RL_RETURN_IF_ERROR(CheckName("task", task));
  if (columns.empty()) return Status::InvalidArgument("task '" + task + "' names no columns");
  std::unordered_set<std::string_view> seen;
  for (const auto& c : columns) {
    RL_RETURN_IF_ERROR(CheckName("column", c));
    // No row can have them: a task that needed one would never see a ready row.
    if (c == kIndexField || c == kLeaseField) {
      return Status::InvalidArgument("'" + c + "' is reserved, not a column name: no row has it");
    }
    if (!seen.insert(c).second) return Status::InvalidArgument("column '" + c + "' named twice");
  }
  return Status::OK();
}

Result<std::optional<Record>> Store::PlanDeclare(const std::string& task, const std::vector<std::string>& columns,
                                                 bool optional) const {
  RL_RETURN_IF_ERROR(CheckTaskColumns(task, columns));
  if (HasTask(task)) {
    if (TaskColumns(task) != columns) return Status::Conflict("task '" + task + "' exists with other columns");
    if (IsOptional(task) != optional) {
      return Status::Conflict("task '" + task + "' exists as " + (optional ? "a required" : "an optional") + " task");
    }
    return std::optional<Record>();
  }
  if (tasks_.size() >= kMaxTasks) return Status::InvalidArgument("at most 64 tasks");
  Record rec;
  rec.type = RecordType::kDeclare;
  rec.task = task;
  rec.columns = columns;
  rec.optional = optional;
  return std::optional<Record>(std::move(rec));
}

Result<Record> Store::PlanRetire(const std::string& task) const {
  RL_RETURN_IF_ERROR(CheckName("task", task));
  auto it = task_ids_.find(task);
  if (it == task_ids_.end()) return Status::NotFound("unknown task '" + task + "'");
  Record rec;
  rec.type = RecordType::kRetire;
  rec.task = task;
  // What ApplyRetire will free: rows every other required task consumed that no other task's
  // lease holds (none while no other required task exists).
  uint64_t t = it->second;
  uint64_t mask = hold_mask_ & ~(uint64_t{1} << t);
  if (mask == 0) return rec;
  for (const auto& [index, row] : rows_) {
    bool held = false;
    for (const auto& [task_id, lease] : row.leases) held = held || task_id != t;
    rec.freed += (row.consumed & mask) == mask && !held ? 1 : 0;
  }
  return rec;
}

// Walks the task's ready rows (or ready groups) in index order and picks units for a get, setting
// aside rows that are stale or in a uniform group. With `units` null, the rows picked are appended
// to rec->indices instead (a get that is not balanced needs no units).
void Store::CollectUnits(const Task& task, uint32_t t, const GetRequest& req, size_t want_rows,
                         std::vector<Unit>* units, Record* rec) const {
  uint32_t balance_col = req.balance.empty() ? UINT32_MAX : ColumnId(req.balance);
  uint32_t uniform_col = req.drop_uniform.empty() ? UINT32_MAX : ColumnId(req.drop_uniform);
  size_t taken = 0;
  auto consider = [&](const std::vector<uint64_t>& members) {
    bool stale = false, any_leased_elsewhere = false;
    for (uint64_t i : members) {
      const Row& row = rows_.at(i);
      stale = stale || (req.has_min_version && IsStale(row, req.min_version));
      any_leased_elsewhere = any_leased_elsewhere || !row.leases.empty();
    }
    if (stale) {
      auto& out = req.regenerate_stale && !any_leased_elsewhere ? rec->regenerated : rec->dropped;
      out.insert(out.end(), members.begin(), members.end());
      return;
    }
    if (uniform_col != UINT32_MAX) {
      // Uniform: every member has the column and all values are equal.
      const Cell* first = Find(rows_.at(members[0]), uniform_col);
      bool uniform = first != nullptr;
      for (uint64_t i : members) {
        const Cell* v = Find(rows_.at(i), uniform_col);
        uniform = uniform && v != nullptr && *v == *first;
      }
      if (uniform) {
        rec->dropped.insert(rec->dropped.end(), members.begin(), members.end());
        rec->uniform += members.size();
        const Value& v = first->value();  // all members' values are equal
        if (const auto* d = std::get_if<double>(&v)) rec->uniform_sum += *d * static_cast<double>(members.size());
        if (const auto* i = std::get_if<int64_t>(&v)) {
          rec->uniform_sum += static_cast<double>(*i) * static_cast<double>(members.size());
        }
        return;
      }
    }
    if (taken > 0 && taken + members.size() > want_rows) {
      rec->full = true;  // the next group does not fit: this get is as full as it can be
      return;
    }
    taken += members.size();
    if (units == nullptr) {
      rec->indices.insert(rec->indices.end(), members.begin(), members.end());
      return;
    }
    Unit u;
    for (uint64_t i : members) u.tokens += balance_col == UINT32_MAX ? 1 : Tokens(rows_.at(i), balance_col);
    u.indices = members;
    units->push_back(std::move(u));
  };
  if (req.groups) {
    for (const auto& [first, key] : task.ready_groups) {
      if (taken >= want_rows) break;
      std::vector<uint64_t> members;
      for (uint64_t i : groups_.at(key).members) {
        if (task.ready.count(i)) members.push_back(i);
      }
      consider(members);
    }
  } else {
    std::vector<uint64_t> one(1);  // a row alone is a unit: one vector for them all
    for (uint64_t i : task.ready) {
      if (taken >= want_rows) break;
      one[0] = i;
      consider(one);
    }
  }
  (void)t;
}

Status CheckGet(const GetRequest& req) {
  if (!req.columns.empty()) RL_RETURN_IF_ERROR(CheckTaskColumns(req.task, req.columns));
  if (req.count < 1 || req.count > kMaxCount) return Status::InvalidArgument("count must be 1 to 1000000");
  if (req.parts < 1 || req.parts > 64) return Status::InvalidArgument("parts must be 1 to 64");
  // Bounded as renew_ms is: now + 2^63 - 1 would wrap to a deadline in the past, and the lease
  // would end in the same turn that made it, its rows handed to the next get while A still works.
  if (req.lease_ms <= 0 || req.lease_ms > kMaxRenewMs) {
    return Status::InvalidArgument("lease_ms must be 1 to " + std::to_string(kMaxRenewMs) + " (a year)");
  }
  if (!req.drop_uniform.empty() && !req.groups) return Status::InvalidArgument("drop-uniform needs whole groups");
  if (req.also.size() > kMaxAlsoColumns) return Status::InvalidArgument("also names more than 64 columns");
  for (size_t k = 0; k < req.also.size(); ++k) {
    const std::string& c = req.also[k];
    RL_RETURN_IF_ERROR(CheckName("also column", c));
    if (c == kIndexField || c == kLeaseField) {
      return Status::InvalidArgument("also: '" + c + "' is reserved, not a column name: no row has it");
    }
    if (std::find(req.also.begin(), req.also.begin() + k, c) != req.also.begin() + k) {
      return Status::InvalidArgument("also: column '" + c + "' named twice");
    }
    if (std::find(req.columns.begin(), req.columns.end(), c) != req.columns.end()) {
      return Status::InvalidArgument("also: column '" + c + "' is one of the task's columns");
    }
  }
  return Status::OK();
}

Result<Record> Store::PlanGet(const GetRequest& req, int64_t now_ms) const {
  RL_RETURN_IF_ERROR(CheckGet(req));
  auto it = task_ids_.find(req.task);
  if (it == task_ids_.end()) return Status::NotFound("unknown task '" + req.task + "'");
  const Task& task = tasks_[it->second];
  Record rec;
  rec.type = RecordType::kLease;
  rec.task = req.task;
  rec.deadline_ms = now_ms + req.lease_ms;
  rec.holder = req.holder;
  rec.also = req.also;  // a reserved part claimed below hands out the claimer's
  bool balanced = !req.balance.empty() && req.parts > 1;
  if (balanced) {
    for (const auto& [id, lease] : task.leases) {
      if (lease.reserved && lease.deadline_ms > now_ms) {
        rec.lease = id;
        rec.takeover = true;
        rec.indices.assign(lease.indices.begin(), lease.indices.end());
        return rec;
      }
    }
  }
  size_t want = size_t{req.count} * (balanced ? req.parts : 1);
  std::vector<Unit> units;
  rec.lease = next_lease_;
  if (!balanced) {  // the rows taken go straight to rec.indices
    CollectUnits(task, it->second, req, want, nullptr, &rec);
    if (rec.indices.empty()) rec.lease = 0;  // no lease was made
    return rec;
  }
  CollectUnits(task, it->second, req, want, &units, &rec);
  // Longest-processing-time first: the largest unit goes to the part with the fewest tokens.
  std::sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.tokens > b.tokens; });
  std::vector<uint64_t> load(req.parts, 0);
  std::vector<std::vector<uint64_t>> parts(req.parts);
  for (const Unit& u : units) {
    size_t p = std::min_element(load.begin(), load.end()) - load.begin();
    load[p] += u.tokens;
    parts[p].insert(parts[p].end(), u.indices.begin(), u.indices.end());
  }
  for (auto& p : parts) std::sort(p.begin(), p.end());
  rec.indices = parts[0];
  if (rec.indices.empty()) rec.lease = 0;  // nothing ready: no lease, no reserved parts
  uint64_t next = next_lease_ + 1;
  for (size_t p = 1; p < parts.size(); ++p) {
    if (!parts[p].empty()) rec.reserved.push_back({next++, parts[p]});
  }
  return rec;
}

// Sets *why when the row cannot be acked for task t under `lease` (0: any lease).
Status Store::CheckAckable(uint32_t t, uint64_t lease, uint64_t index, const char** why) const {
  *why = nullptr;
  auto it = rows_.find(index);
  if (it == rows_.end()) {
    *why = index < next_index_ ? "already consumed" : "no such row";
    return Status::OK();
  }
  const Row& row = it->second;
  if (row.consumed >> t & 1) {
    *why = "already consumed";
  } else if (IsLeased(row, t)) {
    bool mine = lease == 0;
    for (const auto& [task, l] : row.leases) mine = mine || (task == t && l == lease);
    if (!mine) *why = "leased to another consumer";
  } else if (!HasAll(row, tasks_[t])) {
    *why = "not ready for this task";
  }
  return Status::OK();
}

Result<Record> Store::PlanAck(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) const {
  if (indices.size() > kMaxRowsPerRequest) return Status::TooLarge("ack of more than 1000000 rows");
  auto it = task_ids_.find(task);
  if (it == task_ids_.end()) return Status::NotFound("unknown task '" + task + "'");
  Record rec;
  rec.type = RecordType::kAck;
  rec.task = task;
  rec.lease = lease;
  // A row named twice is acked once; the set is built only when some row is.
  std::vector<uint64_t> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  bool twice = std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end();
  std::unordered_set<uint64_t> seen;
  for (uint64_t i : indices) {
    if (twice && !seen.insert(i).second) continue;
    const char* why = nullptr;
    RL_RETURN_IF_ERROR(CheckAckable(it->second, lease, i, &why));
    (why ? rec.rejected : rec.indices).push_back(i);
  }
  return rec;
}

Result<Record> Store::PlanRelease(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) const {
  auto it = task_ids_.find(task);
  if (it == task_ids_.end()) return Status::NotFound("unknown task '" + task + "'");
  const Task& t = tasks_[it->second];
  Record rec;
  rec.type = RecordType::kRelease;
  rec.task = task;
  rec.lease = lease;
  std::vector<uint64_t> wanted = indices;
  if (wanted.empty() && lease != 0) {
    auto l = t.leases.find(lease);
    if (l != t.leases.end()) wanted.assign(l->second.indices.begin(), l->second.indices.end());
  }
  for (uint64_t i : wanted) {
    auto row = rows_.find(i);
    bool held = false;
    if (row != rows_.end()) {
      for (const auto& [task_id, l] : row->second.leases) held = held || (task_id == it->second && (lease == 0 || l == lease));
    }
    (held ? rec.indices : rec.rejected).push_back(i);
  }
  return rec;
}

// One kRelease record with lease 0: a row is held by at most one lease of a task, so releasing
// its rows from "any lease" releases exactly the holder's leases (and logs in the old format).
Result<Record> Store::PlanReleaseHolder(const std::string& task, const std::string& holder) const {
  if (holder.empty()) return Status::InvalidArgument("a release by holder needs a holder");
  auto it = task_ids_.find(task);
  if (it == task_ids_.end()) return Status::NotFound("unknown task '" + task + "'");
  Record rec;
  rec.type = RecordType::kRelease;
  rec.task = task;
  for (const auto& [id, lease] : tasks_[it->second].leases) {
    if (lease.holder == holder) rec.indices.insert(rec.indices.end(), lease.indices.begin(), lease.indices.end());
  }
  return rec;
}

std::vector<Record> Store::PlanExpiries(int64_t now_ms) const {
  std::vector<Record> out;
  for (auto it = deadlines_.begin(); it != deadlines_.end() && std::get<0>(*it) <= now_ms; ++it) {
    const auto& [deadline, t, id] = *it;
    const Lease& lease = tasks_[t].leases.at(id);
    Record rec;
    rec.type = RecordType::kRelease;
    rec.task = tasks_[t].name;
    rec.lease = id;
    rec.indices.assign(lease.indices.begin(), lease.indices.end());
    out.push_back(std::move(rec));
  }
  return out;
}

Result<Record> Store::PlanMetaSet(const std::string& key, const std::string& value,
                                  const std::optional<std::string>& if_equals) const {
  if (key.empty() || key.size() > 1024) return Status::InvalidArgument("meta key must be 1 to 1024 bytes");
  if (value.size() > (1u << 20)) return Status::TooLarge("meta value larger than 1 MiB");
  if (if_equals) {
    std::string current = Meta(key).value_or("");
    if (current != *if_equals) {
      return Status::Conflict("meta " + key + " is '" + current + "', not '" + *if_equals + "'");
    }
  }
  Record rec;
  rec.type = RecordType::kMetaSet;
  rec.key = key;
  rec.value = value;
  return rec;
}

}  // namespace rl::queue
