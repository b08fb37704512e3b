#include "rl/train/ref_loop.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>

#include "rl/core/clock.h"
#include "rl/core/log.h"
#include "rl/health/progress.h"
#include "rl/model/torch_guard.h"
#include "rl/queue/watched_queue.h"
#include "rl/train/grpo_loss.h"

namespace rl::train {

Result<std::vector<std::vector<float>>> ResponseLogprobs(const model::Transformer& model,
                                                         const std::vector<const Sample*>& samples,
                                                         double temperature, int64_t pad_id, int64_t micro_batch,
                                                         const std::vector<int64_t>& route_shape) {
  std::vector<size_t> order(samples.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto length = [&](size_t i) { return samples[i]->prompt_ids.size() + samples[i]->response_ids.size(); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return length(a) < length(b); });
  std::vector<std::vector<float>> out(samples.size());
  const size_t step = static_cast<size_t>(std::max<int64_t>(1, micro_batch));
  for (size_t at = 0; at < order.size(); at += step) {
    std::vector<const Sample*> piece;
    for (size_t k = at; k < std::min(order.size(), at + step); ++k) piece.push_back(samples[order[k]]);
    Status s = model::TorchGuard("reference log-probabilities", [&]() -> Status {
      c10::NoGradGuard no_grad;
      TokenBatch batch = MakeTokenBatch(piece, pad_id, route_shape);
      RL_ASSIGN_OR_RETURN(at::Tensor lp, TokenLogprobs(model, batch.tokens, batch.mask, temperature, batch.routes));
      lp = lp.to(at::kCPU, at::kFloat).contiguous();
      auto acc = lp.accessor<float, 2>();
      for (size_t i = 0; i < piece.size(); ++i) {
        std::vector<float>& row = out[order[at + i]];
        const int64_t p = static_cast<int64_t>(piece[i]->prompt_ids.size());
        for (size_t j = 0; j < piece[i]->response_ids.size(); ++j) row.push_back(acc[i][p + j - 1]);
      }
      return Status::OK();
    });
    RL_RETURN_IF_ERROR(s);
  }
  return out;
}

namespace {

using queue::GotRow;

Result<std::vector<int64_t>> IdsColumn(const GotRow& row, const char* name) {
  const Value* v = FindColumn(row.columns, name);
  const auto* t = v ? std::get_if<Tensor>(v) : nullptr;
  if (!t || (t->dtype != DType::kI64 && t->dtype != DType::kI32) || t->shape.size() != 1) {
    return Status::DataError(std::string("column '") + name + "' is not a 1-D integer tensor");
  }
  return t->ToI64();
}

// The tokens of a row, as a Sample the trainer's batching takes (every response token scored),
// with its routes when `limits` name some; malformed routes are left out and said in *routes_error.
Result<Sample> TokensOf(const GotRow& row, const RouteLimits& limits, const TokenLimits& tokens,
                        Status* routes_error) {
  Sample s;
  s.index = row.index;
  RL_ASSIGN_OR_RETURN(s.prompt_ids, IdsColumn(row, "prompt_ids"));
  RL_ASSIGN_OR_RETURN(s.response_ids, IdsColumn(row, "response_ids"));
  if (s.prompt_ids.empty()) return Status::DataError("column 'prompt_ids' is empty");
  RL_RETURN_IF_ERROR(CheckTokens(row, s, tokens));
  s.logprobs.assign(s.response_ids.size(), 0.0f);  // MakeTokenBatch's old_lp; not used here
  *routes_error = ReadRoutes(row, limits, &s);  // leaves s.routes empty when it fails
  return s;
}

class Loop {
 public:
  Loop(const RefLoopOptions& o, const model::Transformer& m, RefStats* stats)
      : o_(o), model_(m), client_(o.client), stats_(stats) {}

  Status Run(const std::atomic<bool>& stop) {
    RL_RETURN_IF_ERROR(queue_.ReleaseEarlierLeases(o_.task, o_.holder, o_.events));
    Phase("waiting-for-data");
    queue::GetRequest g;
    g.task = o_.task;
    g.columns = {"prompt_ids", "response_ids"};  // declares the task when nobody has
    if (o_.routing_replay) g.also = {"routes"};  // rl-rollout --record-routes
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
  struct Scored {
    queue::PutRequest put;
    std::vector<uint64_t> failed, dropped;
    uint64_t tokens = 0;
  };

  // A row that cannot be read, or that the model refuses (an id outside its vocabulary, more
  // tokens than its context), never will be: it is consumed unscored, as the trainer drops such a
  // row. Given back, it would be leased and refused again at once, forever. Anything else (out of
  // memory) may pass another time: the row is given back.
  void Fail(const GotRow& row, const Status& s, Scored* out) {
    const bool never = s.code() == Code::kDataError || s.code() == Code::kInvalidArgument;
    spdlog::error("row {}{}: {}", row.index, never ? " dropped" : " given back", s.message());
    if (o_.events) {
      o_.events->Emit("row_failed", {{"index", row.index}, {"error", s.ToString()}, {"dropped", never}});
    }
    (never ? out->dropped : out->failed).push_back(row.index);
  }

  Scored Score(const queue::GetReply& got) {
    Scored out;
    out.put.ack_task = o_.task;
    out.put.ack_lease = got.lease;
    std::vector<Sample> samples;
    std::vector<const GotRow*> rows;
    const model::ModelConfig& c = model_.config();
    const RouteLimits limits = RouteLimitsOf(c, o_.routing_replay);
    for (const GotRow& row : got.rows) {
      Status routes = Status::OK();
      Result<Sample> s = TokensOf(row, limits, TokenLimitsOf(c), &routes);
      if (!s.ok()) {
        Fail(row, s.status(), &out);
        continue;
      }
      if (!routes.ok()) {
        spdlog::warn("{}; scored with the reference's own routing", routes.message());
        ++stats_->unreplayable;
      }
      samples.push_back(std::move(*s));
      rows.push_back(&row);
    }
    std::vector<const Sample*> all;
    for (const Sample& s : samples) all.push_back(&s);
    std::vector<int64_t> route_shape;
    if (limits.sparse_layers > 0) route_shape = {limits.sparse_layers, limits.per_token};
    auto lp = ResponseLogprobs(model_, all, o_.temperature, o_.pad_id, o_.micro_batch, route_shape);
    for (size_t i = 0; i < all.size(); ++i) {
      std::vector<float> one;
      if (lp.ok()) {
        one = std::move((*lp)[i]);
      } else {  // find the row the model refuses: the others are scored alone
        auto alone = ResponseLogprobs(model_, {all[i]}, o_.temperature, o_.pad_id, 1, route_shape);
        if (!alone.ok()) {
          Fail(*rows[i], alone.status(), &out);
          continue;
        }
        one = std::move((*alone)[0]);
      }
      out.tokens += one.size();
      out.put.rows.push_back({rows[i]->index, {{kRefColumn, Tensor::FromF32(one)}}});
      if (c.SparseLayerCount() > 0) {
        out.put.rows.back().columns.push_back({kRefRoutingColumn, std::string(all[i]->routes.empty() ? "own" : "replayed")});
      }
    }
    return out;
  }

  Status Batch(const queue::GetReply& got) {
    Phase("score");
    const int64_t start = MonoMillis();
    Scored s = Score(got);
    const double seconds = (MonoMillis() - start) / 1000.0;
    stats_->compute_s += seconds;
    if (!s.failed.empty()) {
      auto nacked = queue_.Nack(o_.task, got.lease, s.failed);
      if (!nacked.ok()) spdlog::warn("nack of {} rows: {}", s.failed.size(), nacked.status().message());
      stats_->failed += s.failed.size();
    }
    if (!s.dropped.empty()) {
      auto acked = queue_.Ack(o_.task, got.lease, s.dropped);
      if (!acked.ok()) spdlog::warn("ack of {} dropped rows: {}", s.dropped.size(), acked.status().message());
      stats_->dropped += s.dropped.size();
    }
    if (!s.put.rows.empty()) RL_RETURN_IF_ERROR(Commit(s));
    if (o_.events) {
      o_.events->Emit("batch", {{"rows", s.put.rows.size()}, {"failed", s.failed.size()},
                                {"dropped", s.dropped.size()}, {"tokens", s.tokens},
                                {"seconds", seconds}});
    }
    Phase("waiting-for-data");
    return Status::OK();
  }

  Status Commit(const Scored& s) {
    auto done = queue_.Put(s.put);
    if (done.ok()) {
      stats_->rows += s.put.rows.size();
      stats_->tokens += s.tokens;
      health::Progress().rows += s.put.rows.size();
      return Status::OK();
    }
    if (done.status().code() != Code::kConflict && done.status().code() != Code::kNotFound) return done.status();
    // The lease expired before the put: the rows went back to the queue and another instance
    // (or this one, later) scores them. Nothing was written.
    spdlog::warn("{} scored rows not written: {}", s.put.rows.size(), done.status().message());
    stats_->lost += s.put.rows.size();
    return Status::OK();
  }

  void Phase(const std::string& phase) {
    if (o_.events) o_.events->EnterPhase(phase);
  }

  void Progress(bool final) {
    const int64_t now = MonoMillis();
    if (!final && (o_.progress_ms <= 0 || now - last_progress_ < o_.progress_ms || stats_->rows == last_rows_)) return;
    const double rows_per_s = final ? stats_->rows / std::max((now - start_ms_) / 1000.0, 1e-3)
                                    : (stats_->rows - last_rows_) / std::max((now - last_progress_) / 1000.0, 1e-3);
    spdlog::info("{}{} rows scored ({} tokens, {:.0f} rows/s{}, {:.1f} s in forward passes), {} dropped, {} given "
                 "back, {} lost to expired leases",
                 final ? "stopped: " : "", stats_->rows, stats_->tokens, rows_per_s, final ? " overall" : "",
                 stats_->compute_s, stats_->dropped, stats_->failed, stats_->lost);
    last_progress_ = now;
    last_rows_ = stats_->rows;
  }

  const RefLoopOptions& o_;
  const model::Transformer& model_;
  queue::QueueClient client_;
  queue::WatchedQueue queue_{&client_, o_.watchdog};
  RefStats* stats_;
  int64_t start_ms_ = MonoMillis();
  int64_t last_progress_ = start_ms_;
  uint64_t last_rows_ = 0;
};

}  // namespace

Status RunRefLoop(const RefLoopOptions& options, const model::Transformer& reference, const std::atomic<bool>& stop,
                  RefStats* stats) {
  RefStats local;
  Loop loop(options, reference, stats ? stats : &local);
  return loop.Run(stop);
}

}  // namespace rl::train
