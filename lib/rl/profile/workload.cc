#include "rl/profile/workload.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <future>
#include <thread>

namespace rl::profile {
namespace {

using Ns = int64_t;

Ns NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double Micros(Ns from, Ns to) { return static_cast<double>(to - from) / 1000.0; }

// One thread's share of a phase.
struct Lane {
  OpFigure fig;
  Ns end_ns = 0;                  // when its last operation finished
  std::vector<Taken> held;        // what the get phase took, for the ack phase
  std::vector<std::string> keys;  // rows it acked
  Status status;
};

// Runs body(i) for i in [0, n) on n threads released together; returns the release time.
Ns RunTogether(int n, const std::function<void(int)>& body) {
  std::promise<void> go;
  std::shared_future<void> released = go.get_future().share();
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&body, released, i] {
      released.wait();
      body(i);
    });
  }
  Ns start = NowNs();
  go.set_value();
  for (auto& t : threads) t.join();
  return start;
}

class Runner {
 public:
  Runner(const Workload& w, std::vector<std::unique_ptr<QueueDriver>> drivers)
      : w_(w), drivers_(std::move(drivers)), total_(static_cast<uint64_t>(w.producers) * w.rows) {}

  Status PutPhase(OpFigure* out);
  Status GetPhase(OpFigure* out);
  Status AckPhase(OpFigure* out, OpFigure* pipelined);
  Status PipelinePhase(OpFigure* out);
  void CheckOnce(WorkloadRun* run);
  bool timed_out() const { return timed_out_.load(); }

 private:
  QueueDriver& Producer(int i) { return *drivers_[i]; }
  QueueDriver& Consumer(int i) { return *drivers_[w_.producers + i]; }
  bool Expired(Ns deadline);
  Status Produce(QueueDriver& d, Ns deadline, Lane* lane);
  Status TakeAll(QueueDriver& d, Ns deadline, Lane* lane);
  Status AckHeld(QueueDriver& d, Ns deadline, Lane* lane);
  // Acks what the lane holds with up to w_.ack_window acks in flight.
  Status AckHeldPipelined(QueueDriver& d, Ns deadline, Lane* lane);
  Status Stream(QueueDriver& d, Ns deadline, Lane* lane);
  // Runs `work` on n lanes; *out gets their figures and the wall time from release to the last end.
  Status Phase(int n, std::vector<Lane>* lanes, const std::function<Status(int, Ns, Lane*)>& work, OpFigure* out);

  Workload w_;
  std::vector<std::unique_ptr<QueueDriver>> drivers_;
  uint64_t total_;                  // rows per pass
  std::atomic<uint64_t> claimed_{0};
  std::atomic<bool> timed_out_{false};
  std::vector<Lane> consumers_, acked_, acked_pipelined_, streamed_;
};

bool Runner::Expired(Ns deadline) {
  if (w_.stop && w_.stop->load()) {
    timed_out_ = true;
    return true;
  }
  if (NowNs() <= deadline) return false;
  timed_out_ = true;
  return true;
}

Status Runner::Phase(int n, std::vector<Lane>* lanes, const std::function<Status(int, Ns, Lane*)>& work,
                     OpFigure* out) {
  lanes->assign(n, Lane());
  Ns deadline = NowNs() + static_cast<Ns>(w_.phase_limit_s * 1e9);
  Ns start = RunTogether(n, [&](int i) { (*lanes)[i].status = work(i, deadline, &(*lanes)[i]); });
  Ns end = start;
  for (const Lane& lane : *lanes) {
    RL_RETURN_IF_ERROR(lane.status);
    out->Merge(lane.fig);
    end = std::max(end, lane.end_ns);
  }
  out->seconds = static_cast<double>(end - start) / 1e9;
  return Status::OK();
}

Status Runner::Produce(QueueDriver& d, Ns deadline, Lane* lane) {
  const std::string filler(std::max<size_t>(w_.row_bytes, sizeof(Ns)), 'x');
  std::vector<std::string> payloads;
  for (uint64_t done = 0; done < w_.rows && !Expired(deadline);) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(w_.batch, w_.rows - done));
    payloads.resize(n, filler);
    Ns t0 = NowNs();
    for (auto& p : payloads) std::memcpy(p.data(), &t0, sizeof(t0));
    RL_RETURN_IF_ERROR(d.Put(payloads));
    lane->end_ns = NowNs();
    lane->fig.latency_us.push_back(Micros(t0, lane->end_ns));
    lane->fig.rows += n;
    done += n;
  }
  return Status::OK();
}

Status Runner::TakeAll(QueueDriver& d, Ns deadline, Lane* lane) {
  Taken t;
  while (claimed_.load() < total_ && !Expired(deadline)) {
    Ns t0 = NowNs();
    RL_RETURN_IF_ERROR(d.Get(w_.batch, 0, &t));
    if (t.rows() == 0) {  // the last rows are in another consumer's hands
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    lane->end_ns = NowNs();
    lane->fig.latency_us.push_back(Micros(t0, lane->end_ns));
    lane->fig.rows += t.rows();
    claimed_ += t.rows();
    lane->held.push_back(std::move(t));
    t = Taken();
  }
  return Status::OK();
}

Status Runner::AckHeld(QueueDriver& d, Ns deadline, Lane* lane) {
  for (const Taken& t : lane->held) {
    if (Expired(deadline)) break;
    Ns t0 = NowNs();
    RL_RETURN_IF_ERROR(d.Ack(t));
    lane->end_ns = NowNs();
    lane->fig.latency_us.push_back(Micros(t0, lane->end_ns));
    lane->fig.rows += t.rows();
    for (size_t i = 0; i < t.rows(); ++i) lane->keys.push_back(t.Key(i));
  }
  return Status::OK();
}

Status Runner::AckHeldPipelined(QueueDriver& d, Ns deadline, Lane* lane) {
  if (lane->held.empty() || Expired(deadline)) return Status::OK();
  RL_RETURN_IF_ERROR(d.AckPipelined(lane->held, w_.ack_window, &lane->fig.latency_us));
  lane->end_ns = NowNs();
  for (const Taken& t : lane->held) {
    lane->fig.rows += t.rows();
    for (size_t i = 0; i < t.rows(); ++i) lane->keys.push_back(t.Key(i));
  }
  return Status::OK();
}

// A pipeline consumer: get what is ready, ack it at once; each row is timed from its put.
Status Runner::Stream(QueueDriver& d, Ns deadline, Lane* lane) {
  Taken t;
  while (claimed_.load() < total_ && !Expired(deadline)) {
    RL_RETURN_IF_ERROR(d.Get(w_.batch, w_.pipeline_wait_ms, &t));
    if (t.rows() == 0) continue;
    RL_RETURN_IF_ERROR(d.Ack(t));
    lane->end_ns = NowNs();
    for (int64_t stamp : t.stamps_ns) lane->fig.latency_us.push_back(Micros(stamp, lane->end_ns));
    for (size_t i = 0; i < t.rows(); ++i) lane->keys.push_back(t.Key(i));
    lane->fig.rows += t.rows();
    claimed_ += t.rows();
  }
  return Status::OK();
}

Status Runner::PutPhase(OpFigure* out) {
  std::vector<Lane> lanes;
  return Phase(w_.producers, &lanes, [&](int i, Ns dl, Lane* l) { return Produce(Producer(i), dl, l); }, out);
}

Status Runner::GetPhase(OpFigure* out) {
  claimed_ = 0;
  return Phase(w_.consumers, &consumers_, [&](int i, Ns dl, Lane* l) { return TakeAll(Consumer(i), dl, l); }, out);
}

// With a window, each consumer's second half of gets is acked pipelined, in a phase of its own.
Status Runner::AckPhase(OpFigure* out, OpFigure* pipelined) {
  std::vector<Lane> taken = std::move(consumers_);
  std::vector<std::vector<Taken>> second(taken.size());
  if (w_.ack_window > 1) {
    for (size_t i = 0; i < taken.size(); ++i) {
      auto& held = taken[i].held;
      auto half = held.begin() + static_cast<std::ptrdiff_t>(held.size() / 2);
      second[i].assign(std::make_move_iterator(half), std::make_move_iterator(held.end()));
      held.erase(half, held.end());
    }
  }
  RL_RETURN_IF_ERROR(Phase(w_.consumers, &acked_, [&](int i, Ns dl, Lane* l) {
    l->held = std::move(taken[i].held);
    return AckHeld(Consumer(i), dl, l);
  }, out));
  if (w_.ack_window <= 1) return Status::OK();
  return Phase(w_.consumers, &acked_pipelined_, [&](int i, Ns dl, Lane* l) {
    l->held = std::move(second[i]);
    return AckHeldPipelined(Consumer(i), dl, l);
  }, pipelined);
}

Status Runner::PipelinePhase(OpFigure* out) {
  claimed_ = 0;
  int n = w_.producers + w_.consumers;
  RL_RETURN_IF_ERROR(Phase(n, &streamed_, [&](int i, Ns dl, Lane* l) {
    if (i < w_.producers) {  // the producers' side is not reported: phase 1 measures puts alone
      Status s = Produce(Producer(i), dl, l);
      l->end_ns = 0;  // end to end ends at the last ack
      l->fig = OpFigure();
      return s;
    }
    return Stream(Consumer(i - w_.producers), dl, l);
  }, out));
  return Status::OK();
}

void Runner::CheckOnce(WorkloadRun* run) {
  std::vector<std::string> keys;
  for (auto* lanes : {&acked_, &acked_pipelined_, &streamed_}) {
    for (Lane& lane : *lanes) keys.insert(keys.end(), lane.keys.begin(), lane.keys.end());
  }
  std::sort(keys.begin(), keys.end());
  size_t distinct = static_cast<size_t>(std::unique(keys.begin(), keys.end()) - keys.begin());
  run->expected = 2 * total_;
  run->consumed = distinct;
  run->duplicates = keys.size() - distinct;
  run->timed_out = timed_out();
}

}  // namespace

Result<WorkloadRun> RunWorkload(const DriverFactory& make, const Workload& w, const ProgressFn& progress) {
  if (w.producers < 1 || w.consumers < 1 || w.batch < 1 || w.rows < 1) {
    return Status::InvalidArgument("a workload needs at least one producer, consumer, row and row per batch");
  }
  std::vector<std::unique_ptr<QueueDriver>> drivers;
  for (int i = 0; i < w.producers + w.consumers; ++i) {
    RL_ASSIGN_OR_RETURN(auto d, make(i));
    drivers.push_back(std::move(d));
  }
  RL_RETURN_IF_ERROR(drivers[0]->Prepare());
  Runner runner(w, std::move(drivers));
  WorkloadRun run;
  auto step = [&](const char* name, Status (Runner::*phase)(OpFigure*), OpFigure* out) {
    if (progress) progress(name);
    return (runner.*phase)(out);
  };
  RL_RETURN_IF_ERROR(step("put", &Runner::PutPhase, &run.put));
  RL_RETURN_IF_ERROR(step("get", &Runner::GetPhase, &run.get));
  if (progress) progress("ack");
  RL_RETURN_IF_ERROR(runner.AckPhase(&run.ack, &run.ack_pipelined));
  RL_RETURN_IF_ERROR(step("pipeline", &Runner::PipelinePhase, &run.e2e));
  if (w.stop && w.stop->load()) return Status::Timeout("interrupted");
  runner.CheckOnce(&run);
  return run;
}

}  // namespace rl::profile
