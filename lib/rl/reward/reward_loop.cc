#include "rl/reward/reward_loop.h"

#include <algorithm>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/health/progress.h"
#include "rl/queue/watched_queue.h"

namespace rl::reward {
namespace {

using queue::GotRow;

// The text of a column that should hold a string; a number is accepted as its decimal form.
Result<std::string> TextColumn(const GotRow& row, const char* name) {
  const Value* v = FindColumn(row.columns, name);
  if (v == nullptr) return Status::DataError(std::string("row has no column '") + name + "'");
  if (auto* s = std::get_if<std::string>(v)) return *s;
  if (auto* i = std::get_if<int64_t>(v)) return std::to_string(*i);
  return Status::DataError(std::string("column '") + name + "' is a " + ValueTypeName(*v) + ", not a string");
}

Result<RewardRequest> RequestOf(const GotRow& row) {
  RewardRequest req;
  RL_ASSIGN_OR_RETURN(req.prompt, TextColumn(row, "prompt"));
  RL_ASSIGN_OR_RETURN(req.response, TextColumn(row, "response"));
  RL_ASSIGN_OR_RETURN(req.answer, TextColumn(row, "answer"));
  return req;
}

class Loop {
 public:
  Loop(const RewardLoopOptions& o, Verifier* v, RewardStats* stats)
      : o_(o), verifier_(v), client_(o.client), stats_(stats) {}

  Status Run(const std::atomic<bool>& stop) {
    RL_RETURN_IF_ERROR(queue_.ReleaseEarlierLeases(kRewardTask, o_.holder, o_.events));
    Phase("waiting-for-data");
    queue::GetRequest g;
    g.task = kRewardTask;
    g.columns = {"prompt", "response", "answer"};
    g.count = o_.count;
    g.min = 1;
    g.lease_ms = o_.lease_ms;
    g.wait_ms = o_.wait_ms;
    g.holder = o_.holder;
    return queue_.Consume(
        g, stop, [this] { return o_.max_rows == 0 || stats_->rows < o_.max_rows; },
        [this](const queue::GetReply& got) { return Batch(got); }, [this](bool last) { Progress(last); });
  }

 private:
  // What scoring one get gave: the rows to write, the rows to give back, and the error that
  // makes the verifier unusable (OK while it is not).
  struct Scored {
    queue::PutRequest put;
    std::vector<uint64_t> failed;
    double sum = 0;
    Status fatal;
  };

  // Every row of the get goes to the verifier in one call (a judge scores them in one pass).
  Scored Score(const queue::GetReply& got) {
    Scored out;
    out.put.ack_task = kRewardTask;
    out.put.ack_lease = got.lease;
    auto fail = [&](const GotRow& row, const Status& s) {
      spdlog::error("row {}: {}", row.index, s.message());
      if (o_.events) o_.events->Emit("row_failed", {{"index", row.index}, {"error", s.ToString()}});
      out.failed.push_back(row.index);
      if (verifier_->broken()) out.fatal = s;
    };
    std::vector<RewardRequest> reqs;
    std::vector<const GotRow*> asked;
    for (const GotRow& row : got.rows) {
      Result<RewardRequest> req = RequestOf(row);
      if (!req.ok()) {
        fail(row, req.status());
        continue;
      }
      reqs.push_back(std::move(*req));
      asked.push_back(&row);
    }
    std::vector<Result<double>> scored = verifier_->ScoreBatch(reqs);
    for (size_t i = 0; i < asked.size(); ++i) {
      if (!scored[i].ok()) {
        fail(*asked[i], scored[i].status());
        continue;
      }
      out.sum += *scored[i];
      out.put.rows.push_back({asked[i]->index, {{"reward", *scored[i]}}});
    }
    return out;
  }

  Status Batch(const queue::GetReply& got) {
    Phase("score");
    int64_t start = MonoMillis();
    Scored s = Score(got);
    if (!s.failed.empty()) {
      auto nacked = queue_.Nack(kRewardTask, got.lease, s.failed);
      if (!nacked.ok()) spdlog::warn("nack of {} rows: {}", s.failed.size(), nacked.status().message());
      stats_->failed += s.failed.size();
    }
    if (!s.put.rows.empty()) RL_RETURN_IF_ERROR(Commit(s.put, s.sum));
    if (o_.events) {
      o_.events->Emit("batch", {{"rows", s.put.rows.size()}, {"failed", s.failed.size()},
                                {"reward_mean", s.put.rows.empty() ? 0.0 : s.sum / s.put.rows.size()},
                                {"seconds", (MonoMillis() - start) / 1000.0}});
    }
    Phase("waiting-for-data");
    return s.fatal;
  }

  Status Commit(const queue::PutRequest& put, double sum) {
    auto done = queue_.Put(put);
    if (done.ok()) {
      stats_->rows += put.rows.size();
      stats_->reward_sum += sum;
      health::Progress().rows += put.rows.size();
      return Status::OK();
    }
    if (done.status().code() != Code::kConflict && done.status().code() != Code::kNotFound) return done.status();
    // The lease expired before the put: the rows went back to the queue and may be scored by
    // another reward role. Nothing was written.
    spdlog::warn("{} scored rows not written: {}", put.rows.size(), done.status().message());
    stats_->lost += put.rows.size();
    return Status::OK();
  }

  void Phase(const std::string& phase) {
    if (o_.events) o_.events->EnterPhase(phase);
  }

  void Progress(bool final) {
    int64_t now = MonoMillis();
    if (!final && (o_.progress_ms <= 0 || now - last_progress_ < o_.progress_ms || stats_->rows == last_rows_)) return;
    double rate = (stats_->rows - last_rows_) / std::max((now - last_progress_) / 1000.0, 1e-3);
    if (final) rate = stats_->rows / std::max((now - start_ms_) / 1000.0, 1e-3);
    spdlog::info("{}{} rows scored (mean reward {:.3f}, {:.0f} rows/s{}), {} failed, {} lost to expired leases",
                 final ? "stopped: " : "", stats_->rows, stats_->rows ? stats_->reward_sum / stats_->rows : 0.0, rate,
                 final ? " overall" : "", stats_->failed, stats_->lost);
    last_progress_ = now;
    last_rows_ = stats_->rows;
  }

  const RewardLoopOptions& o_;
  Verifier* verifier_;
  queue::QueueClient client_;
  queue::WatchedQueue queue_{&client_, o_.watchdog};
  RewardStats* stats_;
  int64_t start_ms_ = MonoMillis();
  int64_t last_progress_ = start_ms_;
  uint64_t last_rows_ = 0;
};

}  // namespace

Status RunRewardLoop(const RewardLoopOptions& options, Verifier* verifier, const std::atomic<bool>& stop,
                     RewardStats* stats) {
  RewardStats local;
  Loop loop(options, verifier, stats ? stats : &local);
  return loop.Run(stop);
}

}  // namespace rl::reward
