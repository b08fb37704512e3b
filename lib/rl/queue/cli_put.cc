// rl-queue put: JSON lines in, one acknowledged index per row out.
#include <unistd.h>

#include <iostream>
#include <random>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/queue/cli.h"
#include "rl/wire/json_value.h"

namespace rl::queue {
namespace {

Result<ClientRow> RowFromJson(const std::string& line) {
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded()) return Status::DataError("not valid JSON");
  if (!j.is_object()) return Status::DataError("a row must be a JSON object");
  ClientRow row;
  for (auto it = j.begin(); it != j.end(); ++it) {
    if (it.key() == kIndexField) {
      if (!it.value().is_number_unsigned()) return Status::DataError("'index' must be a non-negative integer");
      row.index = it.value().get<uint64_t>();
      continue;
    }
    auto v = ValueFromJson(it.value());
    if (!v.ok()) return Status::DataError("column '" + it.key() + "': " + v.status().message());
    row.columns.emplace_back(it.key(), std::move(*v));
  }
  return row;
}

class PutBatcher {
 public:
  // Every request it sends is an update when `update` names a task.
  PutBatcher(const ClientFlags& c, const PutRequest& update, std::ostream& out) : client_(c.ToOptions()), out_(out) {
    req_.update_task = update.update_task;
    req_.update_lease = update.update_lease;
    req_.renew_ms = update.renew_ms;
  }

  void Add(ClientRow row, size_t line) {
    bytes_ += 64;
    for (const auto& [name, v] : row.columns) bytes_ += name.size() + ValueBytes(v);
    req_.rows.push_back(std::move(row));
    lines_.push_back(line);
  }
  size_t rows() const { return req_.rows.size(); }
  size_t bytes() const { return bytes_; }

  Status Flush() {
    if (req_.rows.empty()) return Status::OK();
    RL_ASSIGN_OR_RETURN(std::vector<uint64_t> indices, client_.Put(req_));
    if (indices.size() != lines_.size()) return Status::Protocol("put reply names a different number of rows");
    for (size_t i = 0; i < indices.size(); ++i) {
      out_ << "{\"index\":" << indices[i] << ",\"line\":" << lines_[i] << "}\n";
    }
    out_.flush();
    done_ += indices.size();
    if (isatty(2) && MonoMillis() - last_progress_ > 2000) {
      last_progress_ = MonoMillis();
      std::cerr << "rl-queue put: " << done_ << " rows acknowledged\r" << std::flush;
    }
    req_.rows.clear();
    lines_.clear();
    bytes_ = 0;
    return Status::OK();
  }

 private:
  QueueClient client_;
  std::ostream& out_;
  PutRequest req_;
  std::vector<size_t> lines_;
  size_t bytes_ = 0, done_ = 0;
  int64_t last_progress_ = 0;
};

constexpr size_t kMaxBatchBytes = 8u << 20;

// --update TASK:LEASE and --renew into the update fields of a put; the task may hold ':'.
Status ParseUpdate(const PutFlags& f, PutRequest* req) {
  if (f.update.empty()) {
    if (f.renew_s > 0) return Status::InvalidArgument("--renew renews the lease of an update: it needs --update");
    return Status::OK();
  }
  size_t colon = f.update.rfind(':');
  std::string lease = colon == std::string::npos ? "" : f.update.substr(colon + 1);
  if (colon == std::string::npos || colon == 0 || lease.empty() || lease.size() > 19 ||
      lease.find_first_not_of("0123456789") != std::string::npos) {
    return Status::InvalidArgument("--update wants TASK:LEASE (the lease id get printed), not '" + f.update + "'");
  }
  if (f.repeat > 1) return Status::InvalidArgument("--repeat makes new rows; an update writes into leased ones");
  req->update_task = f.update.substr(0, colon);
  req->update_lease = std::stoull(lease);
  req->renew_ms = static_cast<int64_t>(f.renew_s * 1000);
  return Status::OK();
}

}  // namespace

int RunPut(const ClientFlags& c, const PutFlags& f, std::istream& in, std::ostream& out) {
  PutRequest update;
  if (Status s = ParseUpdate(f, &update); !s.ok()) return Fail(s);
  PutBatcher batcher(c, update, out);
  std::random_device rd;
  char prefix[32];
  std::snprintf(prefix, sizeof(prefix), "%08x%08x", rd(), rd());  // groups of --repeat: unique per run
  std::string line;
  size_t line_no = 0;
  std::string last_group;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto row = RowFromJson(line);
    if (!row.ok()) {
      Status flushed = batcher.Flush();  // rows before the bad line are kept and reported
      if (!flushed.ok()) return Fail(flushed);
      return Fail(Status::DataError("stdin line " + std::to_string(line_no) + ": " + row.status().message()));
    }
    if (f.repeat > 1) {
      if (row->index) return Fail(Status::DataError("stdin line " + std::to_string(line_no) + ": --repeat makes new rows; drop 'index'"));
      bool has_group = false;
      for (const auto& [name, v] : row->columns) has_group = has_group || name == kGroupColumn;
      if (!has_group) row->columns.emplace_back(kGroupColumn, std::string(prefix) + ":" + std::to_string(line_no));
      if (batcher.rows() + f.repeat > f.batch) {  // a group never straddles two puts
        if (Status s = batcher.Flush(); !s.ok()) return Fail(s);
      }
      for (uint32_t k = 0; k < f.repeat; ++k) batcher.Add(*row, line_no);
      continue;
    }
    // A group is created by one put, so a run of rows with the same group stays in one batch.
    std::string group;
    for (const auto& [name, v] : row->columns) {
      if (name == kGroupColumn) group = GroupKey(v);
    }
    bool continues_group = !group.empty() && group == last_group;
    if (!continues_group && (batcher.rows() >= f.batch || batcher.bytes() >= kMaxBatchBytes)) {
      if (Status s = batcher.Flush(); !s.ok()) return Fail(s);
    }
    last_group = group;
    batcher.Add(std::move(*row), line_no);
  }
  if (Status s = batcher.Flush(); !s.ok()) return Fail(s);
  return kExitOk;
}

}  // namespace rl::queue
