// Store: what a storage unit does with its rows beside puts (docs/design.md "Storage units"): a
// unit has no tasks, so no row is ever freed but by a kFree record.
#include <algorithm>

#include "rl/queue/store.h"

namespace rl::queue {

Result<Record> Store::PlanFree(const std::vector<uint64_t>& indices) const {
  Record rec;
  rec.type = RecordType::kFree;
  for (uint64_t i : indices) {
    bool live = rows_.count(i) > 0 && std::find(rec.indices.begin(), rec.indices.end(), i) == rec.indices.end();
    (live ? rec.indices : rec.rejected).push_back(i);
  }
  return rec;
}

// A freed unit row belongs to no group and no task (a unit has none): it only leaves.
void Store::ApplyFree(const Record& r) {
  for (uint64_t i : r.indices) {
    auto it = rows_.find(i);
    if (it == rows_.end()) continue;
    for (const auto& [id, c] : it->second.cols) Unhold(c);
    for (Task& task : tasks_) task.unconsumed -= it->second.consumed ? 0 : 1;
    rows_.erase(it);
  }
}

std::vector<uint64_t> Store::RowsBefore(const std::string& column, int64_t before, uint64_t from,
                                        size_t limit) const {
  std::vector<uint64_t> out;
  uint32_t col = ColumnId(column);
  if (col == UINT32_MAX) return out;
  for (const auto& [index, row] : rows_) {
    const Cell* c = Find(row, col);
    const auto* ms = c ? std::get_if<int64_t>(&c->value()) : nullptr;
    if (ms != nullptr && *ms < before && index >= from) out.push_back(index);
  }
  std::sort(out.begin(), out.end());
  if (out.size() > limit) out.resize(limit);
  return out;
}

RowsView Store::ViewColumns(const std::vector<uint64_t>& indices, const std::vector<std::string>& columns) const {
  RowsView view;
  std::vector<uint32_t> cols;
  for (const auto& name : columns) cols.push_back(ColumnId(name));
  view.rows.reserve(indices.size());
  for (uint64_t index : indices) {
    auto it = rows_.find(index);
    if (it == rows_.end()) continue;
    size_t begin = view.columns.size();
    for (uint32_t c : cols) {
      const Cell* v = c == UINT32_MAX ? nullptr : Find(it->second, c);
      if (v) view.columns.push_back({column_names_[c], v});
    }
    view.rows.push_back({index, begin, view.columns.size()});
  }
  return view;
}

}  // namespace rl::queue
