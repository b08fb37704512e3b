// Store: the queue's state machine, in memory (docs/design.md "The queue").
//
// Rows are samples addressed by a global index; columns are named, typed values. A task names the
// columns it needs; a row is ready for a task when it has them all, the task has not consumed it,
// and no lease of the task holds it. A row is freed once every required task has consumed it and
// no lease holds it; an optional task (an audit) holds no row alive, and a retired task is gone
// (the rows only it held are freed). Every change is a Record: Plan* checks a request against the
// current state and returns the Record that would carry it out (or the error to reply with),
// without changing anything; Apply carries a Record out. The server logs a Record before applying
// it, and recovery applies the log again, so Apply must be deterministic and never fail.
// Thread safety: none; the server owns the Store on one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "rl/core/status.h"
#include "rl/queue/record.h"
#include "rl/wire/value.h"

namespace rl::queue {

constexpr size_t kMaxTasks = 64;  // consumption is a bit per task
constexpr char kGroupColumn[] = "group";
constexpr char kVersionColumn[] = "version";
constexpr char kIndexField[] = "index";
constexpr char kLeaseField[] = "lease";  // get prints it beside the columns
constexpr size_t kMaxAlsoColumns = 64;
constexpr int64_t kMaxRenewMs = int64_t{365} * 24 * 3600 * 1000;  // a lease (get) or its renewal (update): a year

// The key a group column value is known by: "i:<n>" for integers, "s:<text>" for strings, and
// "" (no group) for anything else, which PlanPut refuses.
std::string GroupKey(const Value& v);
std::string GroupKey(const Cell& c);

struct GetRequest {
  std::string task;
  std::vector<std::string> columns;  // declares the task when it is new; must match otherwise
  uint32_t count = 1;
  uint32_t min = 0;  // hand out once this many rows are ready; 0 means count
  int64_t lease_ms = 60000;
  int64_t wait_ms = 0;
  bool groups = false;
  bool has_min_version = false;
  int64_t min_version = 0;
  bool regenerate_stale = false;  // else stale rows are dropped for this task
  std::string drop_uniform;       // drop groups whose values of this column are all equal
  std::string balance;            // token-balance a round of `parts` batches by this column's length
  uint32_t parts = 1;
  // Who takes the lease, "kind/id" (e.g. "train/0"): a restarted consumer gives back every lease
  // its dead predecessor held (PlanRelease with a holder) instead of waiting for them to expire.
  std::string holder;
  // Columns handed out with each row that has them, beside the task's: not needed for readiness
  // and not part of the task, so they may differ from get to get (a multi-turn rollout's progress,
  // written by update puts, comes back with the prompt to whoever leases the row next).
  std::vector<std::string> also;
};

struct TaskStats {
  std::string name;
  std::vector<std::string> columns;
  bool optional = false;
  uint64_t ready = 0, ready_groups = 0, leased = 0, consumed = 0, dropped = 0;
  uint64_t holds = 0;  // live rows it has not consumed, kept alive for it (0 when optional)
  std::map<std::string, uint64_t> holders;  // rows leased under each named holder
};

// Live rows' columns for a task, in the store: valid until the store next changes.
struct RowsView {
  struct Column {
    std::string_view name;
    const Cell* cell;
  };
  struct Row {
    uint64_t index;
    size_t begin, end;  // its columns: columns[begin, end)
  };
  std::vector<Row> rows;
  std::vector<Column> columns;
};

// What a get says on its own, the queue's state aside (rl-protocol(7), "Error precedence"): its
// columns when it names any (as declare checks them), count, parts, lease, drop_uniform, also.
Status CheckGet(const GetRequest& req);
// A task name and the columns it needs: names of 1 to 256 bytes, none reserved, none twice.
Status CheckTaskColumns(const std::string& task, const std::vector<std::string>& columns);

class Store {
 public:
  Store();

  // --- planning: no change of state -------------------------------------------------------
  // `rows`: each either new (is_new) or naming an existing index; indices of new rows are assigned
  // here. When ack_task is not empty the written rows are also consumed by that task.
  Result<Record> PlanPut(std::vector<PutRow> rows, const std::string& ack_task, uint64_t ack_lease) const;
  // An update put: every row names a live row that lease `lease` of `task` holds (its deadline
  // after now_ms); their columns are written, replacing those the row has except the ones it was
  // created with; the rows stay leased, and with renew_ms > 0 the lease ends at now_ms + renew_ms.
  Result<Record> PlanUpdate(std::vector<PutRow> rows, const std::string& task, uint64_t lease, int64_t renew_ms,
                            int64_t now_ms) const;
  // nullopt when the task already exists with the same columns and the same `optional`.
  Result<std::optional<Record>> PlanDeclare(const std::string& task, const std::vector<std::string>& columns,
                                            bool optional = false) const;
  // Removes the task: its leases, its consumption, its hold on rows. Record::freed says how many
  // rows it alone kept alive (they are freed when the record is applied).
  Result<Record> PlanRetire(const std::string& task) const;
  // A kLease record; its `indices` may hold fewer rows than asked (none at all).
  Result<Record> PlanGet(const GetRequest& req, int64_t now_ms) const;
  Result<Record> PlanAck(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) const;
  Result<Record> PlanRelease(const std::string& task, uint64_t lease, const std::vector<uint64_t>& indices) const;
  // Every row that leases of `holder` hold for `task` (none is not an error).
  Result<Record> PlanReleaseHolder(const std::string& task, const std::string& holder) const;
  // One kRelease record per lease whose deadline is at or before now_ms, earliest first; the
  // cost is in the leases that expire, not in those that do not.
  std::vector<Record> PlanExpiries(int64_t now_ms) const;
  Result<Record> PlanMetaSet(const std::string& key, const std::string& value,
                             const std::optional<std::string>& if_equals) const;

  // --- change ------------------------------------------------------------------------------
  // Takes the record's row values (r.rows is left empty; every other field stays).
  void Apply(Record&& r);
  void Apply(const Record& r) { Apply(Record(r)); }

  // --- queries -----------------------------------------------------------------------------
  bool HasTask(const std::string& task) const { return task_ids_.count(task) > 0; }
  bool IsOptional(const std::string& task) const;  // false when unknown
  std::vector<std::string> TaskColumns(const std::string& task) const;
  // The task's columns (plus group and version, then the columns of `also`, when present) of each
  // of `indices` that is live, in that order, no column twice; nothing when the task is unknown.
  RowsView ViewRows(const std::vector<uint64_t>& indices, const std::string& task,
                    const std::vector<std::string>& also = {}) const;
  std::optional<std::string> Meta(const std::string& key) const;
  std::vector<TaskStats> Stats() const;
  uint64_t live_rows() const { return rows_.size(); }
  uint64_t live_bytes() const { return live_bytes_; }
  uint64_t next_index() const { return next_index_; }
  int64_t NextDeadline() const;  // earliest lease deadline, or INT64_MAX (constant time)
  // The last mutation this sender made, for replying to a retry (rows' values are not kept).
  const Record* LastOf(const std::string& sender) const;

  // --- storage units (docs/design.md "Storage units") --------------------------------------
  // A controller's side: whether a cell refers to unit row UnitKey(unit, row) (Cell::is_ref), and
  // the unit rows no cell has referred to since they were last taken, each once, in order.
  bool HoldsUnitRow(uint64_t key) const { return unit_refs_.count(key) > 0; }
  std::vector<uint64_t> TakeReleased() { return std::move(released_); }
  uint64_t unit_refs() const { return unit_refs_.size(); }
  // A unit's side: a kFree record deleting the live rows of `indices` (the others in `rejected`).
  Result<Record> PlanFree(const std::vector<uint64_t>& indices) const;
  // Live rows from index `from` whose int64 `column` is below `before`, ascending, at most `limit`.
  std::vector<uint64_t> RowsBefore(const std::string& column, int64_t before, uint64_t from, size_t limit) const;
  // The `columns` each of `indices` that is live has, in that order (a unit's read).
  RowsView ViewColumns(const std::vector<uint64_t>& indices, const std::vector<std::string>& columns) const;

  // --- snapshots ---------------------------------------------------------------------------
  std::string EncodeSnapshot() const;
  // The same bytes as a payload that lends the bytes of lent cells (PiecePacker): it may be
  // written on another thread while the store changes.
  WalPayload EncodeSnapshotPayload() const;
  Status LoadSnapshot(const char* data, size_t size);

 private:
  struct Row {
    std::vector<std::pair<uint32_t, Cell>> cols;  // in the order they were written
    uint32_t origin = 0;    // the first `origin` cols came with the row's creation
    uint64_t consumed = 0;  // bit t: task t consumed (or dropped) the row
    std::string group;      // "" when the row has no group
    std::vector<std::pair<uint32_t, uint64_t>> leases;  // (task, lease) holding the row
  };
  struct GroupCount {
    uint32_t ready = 0, consumed = 0;
  };
  struct Lease {
    int64_t deadline_ms = 0;
    bool reserved = false;  // a part of a balanced round not yet claimed
    std::string holder;     // GetRequest::holder of the get that took it; "" when not named
    std::set<uint64_t> indices;
  };
  struct Task {
    std::string name;
    std::vector<uint32_t> cols;
    bool optional = false;
    uint64_t unconsumed = 0;  // live rows whose consumed bit of this task is clear
    std::set<uint64_t> ready;
    std::unordered_map<std::string, GroupCount> group_counts;
    std::set<std::pair<uint64_t, std::string>> ready_groups;  // (first member, group)
    std::map<uint64_t, Lease> leases;
    uint64_t consumed = 0, dropped = 0;
  };
  struct Group {
    std::vector<uint64_t> members;  // ascending
    uint32_t live = 0;
  };

  uint32_t ColumnId(const std::string& name) const;  // UINT32_MAX when unknown
  uint32_t InternColumn(const std::string& name);
  const Cell* Find(const Row& row, uint32_t col) const;
  bool HasAll(const Row& row, const Task& task) const;
  bool IsLeased(const Row& row, uint32_t task) const;
  bool IsStale(const Row& row, int64_t min_version) const;
  uint64_t Tokens(const Row& row, uint32_t col) const;
  void UpdateHoldMask();
  // A cell enters or leaves the store: live_bytes_ and the unit references follow.
  void Hold(const Cell& c);
  void Unhold(const Cell& c);

  void Refresh(uint64_t index, Row& row);
  void SetReady(uint32_t t, uint64_t index, const Row& row, bool ready);
  void UpdateGroupReady(Task& task, const std::string& group);
  void Consume(uint32_t t, uint64_t index, bool dropped);
  void ReleaseRowLease(uint32_t t, uint64_t lease, uint64_t index);
  void Regenerate(uint64_t index);
  void MaybeFree(uint64_t index);
  void AddLease(uint32_t t, uint64_t lease, int64_t deadline, bool reserved, const std::string& holder,
                const std::vector<uint64_t>& idx);
  void SetDeadline(uint32_t t, uint64_t id, Lease& l, int64_t deadline);
  void EraseLease(uint32_t t, std::map<uint64_t, Lease>::iterator it);
  void Remember(const Record& r);
  size_t SnapshotEstimate() const;

  void ApplyPut(Record& r);
  void ApplyUpdate(Record& r);
  void ApplyLease(const Record& r);
  void ApplyAck(const Record& r);
  void ApplyRelease(const Record& r);
  void ApplyDeclare(const Record& r);
  void ApplyRetire(const Record& r);
  void ApplyFree(const Record& r);

  // Planning helpers (store_plan.cc).
  struct Unit {  // a row, or a whole group, handed out together
    std::vector<uint64_t> indices;
    uint64_t tokens = 0;
  };
  void CollectUnits(const Task& task, uint32_t t, const GetRequest& req, size_t want_rows,
                    std::vector<Unit>* units, Record* rec) const;
  Status CheckAckable(uint32_t t, uint64_t lease, uint64_t index, const char** why) const;
  // `existing_only`: why a new row is refused (a put that acks, an update); null when it is not.
  Status CheckPutRows(const std::vector<PutRow>& rows, const char* existing_only,
                      std::vector<std::pair<size_t, std::string>>* groups) const;
  Status CheckPutColumns(const PutRow& pr, size_t n, std::vector<std::pair<size_t, std::string>>* groups) const;
  Status CheckAddTo(const PutRow& pr, size_t n, uint32_t ack_t, const std::string& ack_task, uint64_t ack_lease) const;
  Status CheckUpdateRow(const PutRow& pr, size_t n, uint32_t t, const std::string& task, uint64_t lease,
                        int64_t now_ms) const;

  std::vector<std::string> column_names_;
  std::unordered_map<std::string, uint32_t> column_ids_;
  std::vector<Task> tasks_;
  std::unordered_map<std::string, uint32_t> task_ids_;
  std::unordered_map<uint64_t, Row> rows_;  // a get or an ack looks up each of its rows a few times
  std::unordered_map<std::string, Group> groups_;
  std::set<std::tuple<int64_t, uint32_t, uint64_t>> deadlines_;  // (deadline, task, lease) of every lease
  std::map<std::string, std::string> meta_;
  std::unordered_map<std::string, std::pair<uint64_t, Record>> last_;  // sender -> (touch, record)
  uint64_t touch_ = 0;
  uint64_t next_index_ = 0;
  uint64_t next_lease_ = 1;
  uint64_t live_bytes_ = 0;
  std::unordered_map<uint64_t, uint32_t> unit_refs_;  // UnitKey -> cells referring to it
  std::vector<uint64_t> released_;                    // unit rows no cell refers to any more
  uint64_t hold_mask_ = 0;  // bit t: task t is required (a row waits for its consumption)
  uint32_t group_col_, version_col_;
};

}  // namespace rl::queue
