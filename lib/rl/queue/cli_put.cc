// rl-queue put: JSON lines in, one acknowledged index per row out.
#include <poll.h>
#include <unistd.h>

#include <ext/stdio_filebuf.h>

#include <deque>
#include <iostream>
#include <memory>
#include <random>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/queue/cli.h"
#include "rl/queue/client.h"
#include "rl/queue/pipeline.h"
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

// True when reading the next line will not block: then the replies of the puts in flight can wait.
// `fd`: the descriptor `in` reads from, or -1 for a stream in memory.
bool InputWaiting(std::istream& in, int fd) {
  if (fd < 0 || in.rdbuf()->in_avail() > 0) return true;
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;  // data, or the end of it
}

// Sends full batches through a pipeline of `window` puts and prints each put's indices, in input
// order, when its reply is collected: when the window is full, and whenever the input has nothing
// more for now (a slow writer's rows are acknowledged as they come, not a window later).
class PutBatcher {
 public:
  // Every request it sends is an update when `update` names a task.
  PutBatcher(const ClientFlags& c, const PutRequest& update, int window, std::ostream& out)
      : stager_(c.ToOptions()), pipeline_(c.ToOptions(), window), out_(out) {
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
  size_t pending() const { return pipeline_.pending(); }
  // A queue with storage units has the large values of each put staged on them first.
  Status LearnUnits() {
    RL_ASSIGN_OR_RETURN(std::vector<std::string> units, stager_.Units());
    if (!units.empty()) pipeline_.StageWith(&stager_);
    return Status::OK();
  }

  // Submits the rows added so far; collects the oldest put first when the window is full.
  Status Flush() {
    if (req_.rows.empty()) return Status::OK();
    if (pipeline_.full()) {
      if (Status s = CollectOne(); !s.ok()) {
        (void)Drain();  // what else was acknowledged is still printed
        return s;
      }
    }
    RL_RETURN_IF_ERROR(pipeline_.SubmitPut(req_));
    in_flight_.push_back(std::move(lines_));
    req_.rows.clear();
    lines_.clear();
    bytes_ = 0;
    return Status::OK();
  }

  // Collects every put in flight. After a failed one it still collects (and prints) the others,
  // then returns the first error.
  Status Drain() {
    Status first;
    while (pipeline_.pending() > 0) {
      Status s = CollectOne();
      if (first.ok()) first = s;
    }
    return first;
  }

 private:
  Status CollectOne() {
    auto indices = pipeline_.Collect();
    std::vector<size_t> lines = std::move(in_flight_.front());
    in_flight_.pop_front();
    if (!indices.ok()) return indices.status();
    if (indices->done.size() != lines.size()) return Status::Protocol("put reply names a different number of rows");
    for (size_t i = 0; i < lines.size(); ++i) {
      out_ << "{\"index\":" << indices->done[i] << ",\"line\":" << lines[i] << "}\n";
    }
    out_.flush();
    done_ += lines.size();
    if (isatty(2) && MonoMillis() - last_progress_ > 2000) {
      last_progress_ = MonoMillis();
      std::cerr << "rl-queue put: " << done_ << " rows acknowledged\r" << std::flush;
    }
    return Status::OK();
  }

  QueueClient stager_;
  QueuePipeline pipeline_;
  std::ostream& out_;
  PutRequest req_;
  std::vector<size_t> lines_;
  std::deque<std::vector<size_t>> in_flight_;  // the input lines of each put in flight
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

int RunPut(const ClientFlags& c, const PutFlags& f, std::istream& given, std::ostream& out) {
  // Standard input is read through a buffer of our own, whose in_avail() counts what it holds (std::cin's,
  // synchronised with stdio, says nothing of what stdio holds): InputWaiting needs both.
  // It reads a duplicate of descriptor 0, which it closes when done.
  int fd = &given == &std::cin ? ::dup(0) : -1;
  std::unique_ptr<__gnu_cxx::stdio_filebuf<char>> stdin_buf;
  std::unique_ptr<std::istream> stdin_stream;
  if (fd >= 0) {
    stdin_buf = std::make_unique<__gnu_cxx::stdio_filebuf<char>>(fd, std::ios::in, 1 << 16);
    stdin_stream = std::make_unique<std::istream>(stdin_buf.get());
  }
  std::istream& in = stdin_stream ? *stdin_stream : given;
  PutRequest update;
  if (Status s = ParseUpdate(f, &update); !s.ok()) return Fail(s);
  PutBatcher batcher(c, update, f.window, out);
  if (Status s = batcher.LearnUnits(); !s.ok()) return Fail(s);
  std::random_device rd;
  char prefix[32];
  std::snprintf(prefix, sizeof(prefix), "%08x%08x", rd(), rd());  // groups of --repeat: unique per run
  std::string line;
  size_t line_no = 0;
  std::string last_group;
  while (true) {
    if (batcher.pending() > 0 && !InputWaiting(in, fd)) {
      if (Status s = batcher.Drain(); !s.ok()) return Fail(s);
    }
    if (!std::getline(in, line)) break;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto row = RowFromJson(line);
    if (!row.ok()) {
      Status flushed = batcher.Flush();  // rows before the bad line are kept and reported
      if (Status drained = batcher.Drain(); flushed.ok()) flushed = drained;
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
  Status flushed = batcher.Flush();
  if (Status drained = batcher.Drain(); flushed.ok()) flushed = drained;
  if (!flushed.ok()) return Fail(flushed);
  return kExitOk;
}

}  // namespace rl::queue
