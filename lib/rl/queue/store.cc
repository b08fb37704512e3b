#include "rl/queue/store.h"

#include <algorithm>
#include <climits>

#include "rl/queue/unit_ref.h"

namespace rl::queue {

namespace {
constexpr size_t kMaxRememberedSenders = 65536;
}  // namespace

std::string GroupKey(const Value& v) {
  if (auto* i = std::get_if<int64_t>(&v)) return "i:" + std::to_string(*i);
  if (auto* s = std::get_if<std::string>(&v)) return "s:" + *s;
  return "";
}

std::string GroupKey(const Cell& c) {
  if (std::holds_alternative<std::string>(c.value())) return "s:" + std::string(c.bytes());
  return GroupKey(c.value());
}

Store::Store() {
  group_col_ = InternColumn(kGroupColumn);
  version_col_ = InternColumn(kVersionColumn);
}

uint32_t Store::ColumnId(const std::string& name) const {
  auto it = column_ids_.find(name);
  return it == column_ids_.end() ? UINT32_MAX : it->second;
}

uint32_t Store::InternColumn(const std::string& name) {
  auto it = column_ids_.find(name);  // emplace would build a node for every value applied
  if (it != column_ids_.end()) return it->second;
  column_ids_.emplace(name, static_cast<uint32_t>(column_names_.size()));
  column_names_.push_back(name);
  return column_names_.size() - 1;
}

const Cell* Store::Find(const Row& row, uint32_t col) const {
  for (const auto& [id, v] : row.cols) {
    if (id == col) return &v;
  }
  return nullptr;
}

bool Store::HasAll(const Row& row, const Task& task) const {
  for (uint32_t c : task.cols) {
    if (!Find(row, c)) return false;
  }
  return true;
}

bool Store::IsLeased(const Row& row, uint32_t task) const {
  for (const auto& [t, lease] : row.leases) {
    if (t == task) return true;
  }
  return false;
}

void Store::Hold(const Cell& c) {
  live_bytes_ += c.MemoryBytes();
  if (c.is_ref()) ++unit_refs_[UnitKey(c.ref().unit, c.ref().row)];
}

void Store::Unhold(const Cell& c) {
  live_bytes_ -= c.MemoryBytes();
  if (!c.is_ref()) return;
  auto it = unit_refs_.find(UnitKey(c.ref().unit, c.ref().row));
  if (it == unit_refs_.end() || --it->second > 0) return;
  released_.push_back(it->first);
  unit_refs_.erase(it);
}

void Store::UpdateHoldMask() {
  hold_mask_ = 0;
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    if (!tasks_[t].optional) hold_mask_ |= uint64_t{1} << t;
  }
}

bool Store::IsOptional(const std::string& task) const {
  auto t = task_ids_.find(task);
  return t != task_ids_.end() && tasks_[t->second].optional;
}

// --- readiness -------------------------------------------------------------------------------

void Store::SetReady(uint32_t t, uint64_t index, const Row& row, bool ready) {
  Task& task = tasks_[t];
  bool changed = ready ? task.ready.insert(index).second : task.ready.erase(index) > 0;
  if (!changed) return;
  if (!row.group.empty()) {
    task.group_counts[row.group].ready += ready ? 1 : -1;
    UpdateGroupReady(task, row.group);
  }
}

void Store::UpdateGroupReady(Task& task, const std::string& group) {
  auto g = groups_.find(group);
  if (g == groups_.end()) return;
  const GroupCount& c = task.group_counts[group];
  bool ready = c.ready > 0 && c.ready + c.consumed == g->second.members.size();
  auto key = std::make_pair(g->second.members.front(), group);
  if (ready) {
    task.ready_groups.insert(key);
  } else {
    task.ready_groups.erase(key);
  }
}

void Store::Refresh(uint64_t index, Row& row) {
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    bool ready = !(row.consumed >> t & 1) && !IsLeased(row, t) && HasAll(row, tasks_[t]);
    SetReady(t, index, row, ready);
  }
}

void Store::Consume(uint32_t t, uint64_t index, bool dropped) {
  auto it = rows_.find(index);
  if (it == rows_.end() || (it->second.consumed >> t & 1)) return;
  Row& row = it->second;
  for (auto& [task, lease] : row.leases) {
    if (task == t) ReleaseRowLease(t, lease, index);
  }
  SetReady(t, index, row, false);
  row.consumed |= uint64_t{1} << t;
  Task& task = tasks_[t];
  task.unconsumed--;
  (dropped ? task.dropped : task.consumed)++;
  if (!row.group.empty()) {
    task.group_counts[row.group].consumed++;
    UpdateGroupReady(task, row.group);
  }
  MaybeFree(index);
}

// Removes `index` from lease `lease` of task t (the row's own lease list included).
void Store::ReleaseRowLease(uint32_t t, uint64_t lease, uint64_t index) {
  Task& task = tasks_[t];
  auto l = task.leases.find(lease);
  if (l != task.leases.end()) {
    l->second.indices.erase(index);
    if (l->second.indices.empty()) EraseLease(t, l);
  }
  auto r = rows_.find(index);
  if (r == rows_.end()) return;
  auto& leases = r->second.leases;
  leases.erase(std::remove(leases.begin(), leases.end(), std::make_pair(t, lease)), leases.end());
}

// A row goes once every required task has consumed it and no lease holds it; while no required
// task exists, none goes.
void Store::MaybeFree(uint64_t index) {
  auto it = rows_.find(index);
  if (it == rows_.end() || hold_mask_ == 0) return;
  Row& row = it->second;
  if ((row.consumed & hold_mask_) != hold_mask_ || !row.leases.empty()) return;
  // An optional task that had not consumed it loses it; for its groups the row counts as
  // consumed, as a member freed before a task was declared does (ApplyDeclare).
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    if (row.consumed >> t & 1) continue;
    SetReady(t, index, row, false);
    tasks_[t].unconsumed--;
    if (!row.group.empty()) {
      tasks_[t].group_counts[row.group].consumed++;
      UpdateGroupReady(tasks_[t], row.group);
    }
  }
  for (const auto& [id, c] : row.cols) Unhold(c);
  if (!row.group.empty()) {
    auto g = groups_.find(row.group);
    if (g != groups_.end() && --g->second.live == 0) {
      for (auto& task : tasks_) {
        task.group_counts.erase(row.group);
        task.ready_groups.erase({g->second.members.front(), row.group});
      }
      groups_.erase(g);
    }
  }
  rows_.erase(it);
}

// A stale row goes back to the columns it was created with and to no task's consumption, so the
// task that produces the rest (generation) sees it ready again.
void Store::Regenerate(uint64_t index) {
  auto it = rows_.find(index);
  if (it == rows_.end()) return;
  Row& row = it->second;
  for (uint32_t t = 0; t < tasks_.size(); ++t) {
    SetReady(t, index, row, false);
    if (row.consumed >> t & 1) tasks_[t].unconsumed++;
    if (row.consumed >> t & 1 && !row.group.empty()) {
      tasks_[t].group_counts[row.group].consumed--;
      UpdateGroupReady(tasks_[t], row.group);
    }
  }
  row.consumed = 0;
  for (size_t i = row.origin; i < row.cols.size(); ++i) Unhold(row.cols[i].second);
  row.cols.resize(row.origin);
  Refresh(index, row);
}

void Store::AddLease(uint32_t t, uint64_t lease, int64_t deadline, bool reserved, const std::string& holder,
                     const std::vector<uint64_t>& idx) {
  Lease& l = tasks_[t].leases[lease];
  SetDeadline(t, lease, l, deadline);
  l.reserved = reserved;
  l.holder = holder;
  for (uint64_t i : idx) {
    auto it = rows_.find(i);
    if (it == rows_.end() || IsLeased(it->second, t)) continue;
    SetReady(t, i, it->second, false);
    it->second.leases.emplace_back(t, lease);
    l.indices.insert(i);
  }
  if (l.indices.empty()) EraseLease(t, tasks_[t].leases.find(lease));
  next_lease_ = std::max(next_lease_, lease + 1);
}

void Store::SetDeadline(uint32_t t, uint64_t id, Lease& l, int64_t deadline) {
  deadlines_.erase({l.deadline_ms, t, id});
  l.deadline_ms = deadline;
  deadlines_.insert({deadline, t, id});
}

void Store::EraseLease(uint32_t t, std::map<uint64_t, Lease>::iterator it) {
  deadlines_.erase({it->second.deadline_ms, t, it->first});
  tasks_[t].leases.erase(it);
}

// --- apply -----------------------------------------------------------------------------------

void Store::Apply(Record&& r) {
  switch (r.type) {
    case RecordType::kPut: r.update_task.empty() ? ApplyPut(r) : ApplyUpdate(r); break;
    case RecordType::kLease: ApplyLease(r); break;
    case RecordType::kAck: ApplyAck(r); break;
    case RecordType::kRelease: ApplyRelease(r); break;
    case RecordType::kMetaSet: meta_[r.key] = r.value; break;
    case RecordType::kDeclare: ApplyDeclare(r); break;
    case RecordType::kRetire: ApplyRetire(r); break;
    case RecordType::kFree: ApplyFree(r); break;
  }
  r.rows.clear();  // the values now live in the store
  Remember(r);
}

void Store::ApplyPut(Record& r) {
  for (PutRow& pr : r.rows) {
    auto [slot, created] = rows_.try_emplace(pr.index);
    Row& row = slot->second;
    for (Task& task : tasks_) task.unconsumed += created ? 1 : 0;
    row.cols.reserve(row.cols.size() + pr.columns.size());
    for (auto& [name, value] : pr.columns) {
      uint32_t id = InternColumn(name);
      if (Find(row, id)) continue;  // planned away; a replayed log never has it
      if (id == group_col_ && pr.is_new) row.group = GroupKey(value);
      Hold(value);
      row.cols.emplace_back(id, std::move(value));
    }
    if (pr.is_new) {
      row.origin = static_cast<uint32_t>(row.cols.size());
      next_index_ = std::max(next_index_, pr.index + 1);
      if (!row.group.empty()) {
        Group& g = groups_[row.group];
        g.members.push_back(pr.index);
        g.live++;
      }
    }
  }
  // Group membership is complete once the whole put is in: now readiness can be computed.
  for (const PutRow& pr : r.rows) {
    auto it = rows_.find(pr.index);
    if (it != rows_.end()) Refresh(pr.index, it->second);
  }
  if (!r.task.empty()) {
    auto t = task_ids_.find(r.task);
    if (t != task_ids_.end()) {
      for (const PutRow& pr : r.rows) Consume(t->second, pr.index, false);
    }
  }
}

// A value the row has is replaced where it lies (so the columns it was created with stay the first
// `origin`), one it lacks is added; the rows stay leased. Rows that are gone and columns the row
// was created with are left alone: planning refuses them, so only a damaged log holds them.
void Store::ApplyUpdate(Record& r) {
  for (PutRow& pr : r.rows) {
    auto it = rows_.find(pr.index);
    if (it == rows_.end()) continue;
    Row& row = it->second;
    for (auto& [name, value] : pr.columns) {
      uint32_t id = InternColumn(name);
      auto col = std::find_if(row.cols.begin(), row.cols.end(), [id](const auto& c) { return c.first == id; });
      if (col == row.cols.end()) {
        Hold(value);
        row.cols.emplace_back(id, std::move(value));
      } else if (static_cast<size_t>(col - row.cols.begin()) >= row.origin) {
        Hold(value);
        Unhold(col->second);
        col->second = std::move(value);
      }
    }
    Refresh(pr.index, row);  // an added column may make the row ready for another task
  }
  auto t = task_ids_.find(r.update_task);
  if (t == task_ids_.end() || r.deadline_ms == 0) return;
  auto l = tasks_[t->second].leases.find(r.update_lease);
  if (l != tasks_[t->second].leases.end()) SetDeadline(t->second, r.update_lease, l->second, r.deadline_ms);
}

void Store::ApplyLease(const Record& r) {
  auto t = task_ids_.find(r.task);
  if (t == task_ids_.end()) return;
  for (uint64_t i : r.dropped) Consume(t->second, i, true);
  for (uint64_t i : r.regenerated) Regenerate(i);
  if (r.takeover) {
    auto l = tasks_[t->second].leases.find(r.lease);
    if (l != tasks_[t->second].leases.end()) {
      l->second.reserved = false;
      l->second.holder = r.holder;
      SetDeadline(t->second, r.lease, l->second, r.deadline_ms);
    }
  } else if (!r.indices.empty()) {
    AddLease(t->second, r.lease, r.deadline_ms, false, r.holder, r.indices);
  }
  // A reserved part has no holder until a get claims it.
  for (const auto& res : r.reserved) AddLease(t->second, res.lease, r.deadline_ms, true, "", res.indices);
}

void Store::ApplyAck(const Record& r) {
  auto t = task_ids_.find(r.task);
  if (t == task_ids_.end()) return;
  for (uint64_t i : r.indices) Consume(t->second, i, false);
}

void Store::ApplyRelease(const Record& r) {
  auto t = task_ids_.find(r.task);
  if (t == task_ids_.end()) return;
  for (uint64_t i : r.indices) {
    auto row = rows_.find(i);
    if (row == rows_.end()) continue;
    std::vector<uint64_t> held;
    for (const auto& [task, lease] : row->second.leases) {
      if (task == t->second && (r.lease == 0 || lease == r.lease)) held.push_back(lease);
    }
    for (uint64_t lease : held) ReleaseRowLease(t->second, lease, i);
    Refresh(i, row->second);
    MaybeFree(i);
  }
}

void Store::ApplyDeclare(const Record& r) {
  if (task_ids_.count(r.task) || tasks_.size() >= kMaxTasks) return;
  Task task;
  task.name = r.task;
  task.optional = r.optional;
  for (const auto& c : r.columns) task.cols.push_back(InternColumn(c));
  uint32_t t = static_cast<uint32_t>(tasks_.size());
  for (const auto& [index, row] : rows_) task.unconsumed += row.consumed >> t & 1 ? 0 : 1;
  // Members of a group that were freed before this task existed count as consumed by it, as
  // LoadSnapshot counts them, so the rest of the group can still become ready.
  for (const auto& [key, g] : groups_) {
    for (uint64_t i : g.members) task.group_counts[key].consumed += rows_.count(i) ? 0 : 1;
  }
  task_ids_[r.task] = t;
  tasks_.push_back(std::move(task));
  UpdateHoldMask();
  for (auto& [index, row] : rows_) Refresh(index, row);
}

// The task leaves its slot: tasks after it move down one, and so do their bits in every row's
// consumed mask and their ids in leases, so the state is what it would be had the task never
// been declared (a snapshot needs no trace of it). Then every row only it held is freed.
void Store::ApplyRetire(const Record& r) {
  auto found = task_ids_.find(r.task);
  if (found == task_ids_.end()) return;
  uint32_t t = found->second;
  tasks_.erase(tasks_.begin() + t);
  task_ids_.clear();
  for (uint32_t k = 0; k < tasks_.size(); ++k) task_ids_[tasks_[k].name] = k;
  uint64_t below = (uint64_t{1} << t) - 1;  // t < 64
  std::vector<uint64_t> indices;
  indices.reserve(rows_.size());
  for (auto& [index, row] : rows_) {
    uint64_t above = t == 63 ? 0 : row.consumed >> (t + 1);
    row.consumed = (row.consumed & below) | (above << t);
    auto& leases = row.leases;
    leases.erase(std::remove_if(leases.begin(), leases.end(), [t](const auto& l) { return l.first == t; }),
                 leases.end());
    for (auto& l : leases) l.first -= l.first > t ? 1 : 0;
    indices.push_back(index);
  }
  deadlines_.clear();
  for (uint32_t k = 0; k < tasks_.size(); ++k) {
    for (const auto& [id, lease] : tasks_[k].leases) deadlines_.insert({lease.deadline_ms, k, id});
  }
  UpdateHoldMask();
  for (uint64_t i : indices) MaybeFree(i);
}

void Store::Remember(const Record& r) {
  if (r.sender.empty()) return;
  last_[r.sender] = {++touch_, r};  // rows already cleared: the reply needs the indices only
  if (last_.size() > 2 * kMaxRememberedSenders) {
    std::vector<uint64_t> touches;
    for (const auto& [s, e] : last_) touches.push_back(e.first);
    std::nth_element(touches.begin(), touches.begin() + kMaxRememberedSenders, touches.end());
    uint64_t cut = touches[kMaxRememberedSenders];
    for (auto it = last_.begin(); it != last_.end();) {
      it = it->second.first < cut ? last_.erase(it) : std::next(it);
    }
  }
}

// --- queries ---------------------------------------------------------------------------------

const Record* Store::LastOf(const std::string& sender) const {
  auto it = last_.find(sender);
  return it == last_.end() ? nullptr : &it->second.second;
}

std::vector<std::string> Store::TaskColumns(const std::string& task) const {
  std::vector<std::string> out;
  auto t = task_ids_.find(task);
  if (t == task_ids_.end()) return out;
  for (uint32_t c : tasks_[t->second].cols) out.push_back(column_names_[c]);
  return out;
}

RowsView Store::ViewRows(const std::vector<uint64_t>& indices, const std::string& task,
                         const std::vector<std::string>& also) const {
  RowsView view;
  auto t = task_ids_.find(task);
  if (t == task_ids_.end()) return view;
  std::vector<uint32_t> cols = tasks_[t->second].cols;
  auto add = [&](uint32_t extra) {
    if (extra != UINT32_MAX && std::find(cols.begin(), cols.end(), extra) == cols.end()) cols.push_back(extra);
  };
  add(group_col_);
  add(version_col_);
  for (const auto& name : also) add(ColumnId(name));  // a name no row ever had: none has it
  view.rows.reserve(indices.size());
  view.columns.reserve(indices.size() * cols.size());
  for (uint64_t index : indices) {
    auto it = rows_.find(index);
    if (it == rows_.end()) continue;
    size_t begin = view.columns.size();
    for (uint32_t c : cols) {
      if (const Cell* v = Find(it->second, c)) view.columns.push_back({column_names_[c], v});
    }
    view.rows.push_back({index, begin, view.columns.size()});
  }
  return view;
}

std::optional<std::string> Store::Meta(const std::string& key) const {
  auto it = meta_.find(key);
  if (it == meta_.end()) return std::nullopt;
  return it->second;
}

std::vector<TaskStats> Store::Stats() const {
  std::vector<TaskStats> out;
  for (const Task& task : tasks_) {
    TaskStats s;
    s.name = task.name;
    s.optional = task.optional;
    s.holds = task.optional ? 0 : task.unconsumed;
    for (uint32_t c : task.cols) s.columns.push_back(column_names_[c]);
    s.ready = task.ready.size();
    s.ready_groups = task.ready_groups.size();
    for (const auto& [id, lease] : task.leases) {
      s.leased += lease.indices.size();
      if (!lease.holder.empty()) s.holders[lease.holder] += lease.indices.size();
    }
    s.consumed = task.consumed;
    s.dropped = task.dropped;
    out.push_back(std::move(s));
  }
  return out;
}

int64_t Store::NextDeadline() const {
  return deadlines_.empty() ? INT64_MAX : std::get<0>(*deadlines_.begin());
}

}  // namespace rl::queue
