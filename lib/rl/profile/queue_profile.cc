#include "rl/profile/queue_profile.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <cstdio>
#include <thread>

#include "rl/core/json_field.h"
#include "rl/core/log.h"
#include "rl/core/printf.h"
#include "rl/profile/queue_driver.h"
#include "rl/profile/queue_target.h"
#include "rl/profile/redis_target.h"
#include "rl/profile/zmq_floor.h"
#include "rl/queue/client.h"

namespace rl::profile {
namespace {

constexpr uint64_t kDefaultBytesPerProducer = 64u << 20;
constexpr uint64_t kDefaultMaxRows = 8192;
constexpr int kDefaultRuns = 3;
constexpr size_t kReplyBytes = 64;       // a put or ack reply, roughly
constexpr size_t kIndexBytes = 9;        // a msgpack u64 row index
constexpr double kClientGiveUpS = 30;

Result<std::string> ServerFsync(const std::string& endpoint) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.give_up_s = 10;
  queue::QueueClient client(o);
  RL_ASSIGN_OR_RETURN(nlohmann::json stat, client.Stat());
  return TextField(stat, "fsync", "unknown");
}

// Other work on the machine competes with the benchmark's threads; say so, since it shows in the figures.
void WarnWhenBusy() {
  double load = 0;
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
  if (load > 0.5 * cpus) {
    spdlog::warn("load average {:.1f} on {} CPUs before the run: other work competes with it; figures will be noisy",
                 load, cpus);
  }
}

// Every run of one system in one configuration, turned into figures once all runs are in.
struct Series {
  Series(std::string system_name, std::string fsync_name) : system(std::move(system_name)), fsync(std::move(fsync_name)) {}
  std::string system, fsync;
  std::vector<std::pair<std::string, std::vector<OpFigure>>> ops;  // in the order first added
  std::optional<bool> exactly_once;                                // queues only

  void Add(const std::string& op, OpFigure fig) {
    for (auto& [name, runs] : ops) {
      if (name == op) return runs.push_back(std::move(fig));
    }
    ops.push_back({op, {std::move(fig)}});
  }
  void AddRun(const WorkloadRun& run) {
    Add("put", run.put);
    Add("get", run.get);
    Add("ack", run.ack);
    if (run.ack_pipelined.rows > 0) Add("ack-pipelined", run.ack_pipelined);
    Add("e2e", run.e2e);
    exactly_once = exactly_once.value_or(true) && run.ExactlyOnce();
  }
  void AppendFigures(const Workload& w, std::vector<Figure>* out) {
    for (auto& [op, runs] : ops) {
      Figure f = MakeFigure(system, op, &runs);
      f.row_bytes = w.row_bytes;
      f.batch = w.batch;
      f.fsync = fsync;
      f.producers = w.producers;
      f.consumers = w.consumers;
      f.exactly_once = exactly_once;
      out->push_back(std::move(f));
    }
  }
};

class Profiler {
 public:
  Profiler(const QueueProfileOptions& o, const ProfileHooks& hooks, std::ostream& out)
      : o_(o), hooks_(hooks), out_(out) {}
  Result<std::vector<Figure>> Run();

 private:
  Status StartRedis();
  // One run of one system for one row size; runs count from 1.
  Status MeasureFloor(const Workload& w, Series* floor);
  Status MeasureQueue(const DriverFactory& make, const Workload& w, int run, Series* series);
  Status MeasureRlQueue(const Workload& w, int run, Series* series);
  Result<std::unique_ptr<QueueTarget>> StartQueue(const std::string& fsync);
  Result<std::vector<Figure>> MeasureRowSize(size_t row_bytes);
  void Print(const std::vector<Figure>& figs);
  void PrintVerdict(const std::vector<Figure>& all);
  void PrintAckVerdict(const std::vector<Figure>& all);

  QueueProfileOptions o_;
  ProfileHooks hooks_;
  std::ostream& out_;
  std::vector<std::unique_ptr<RedisTarget>> redis_;  // one per Redis policy compared with
};

Status Profiler::StartRedis() {
  if (o_.redis == "off") return Status::OK();
  std::string binary = o_.redis == "auto" ? FindOnPath("redis-server") : o_.redis;
  if (binary.empty()) {
    spdlog::info("redis-server is not on PATH: no Redis baseline");
    return Status::OK();
  }
  if (!hooks_.redis_drivers) {
    spdlog::warn("this rl-profile was built without hiredis: no Redis baseline");
    return Status::OK();
  }
  if (::access(binary.c_str(), X_OK) != 0) return Status::InvalidArgument("--redis " + binary + " is not an executable");
  // One server per Redis policy that one of ours is compared with, each with its own file; with
  // --connect, the policy of that server.
  std::vector<std::string> policies = o_.fsync;
  if (!o_.connect.empty()) {
    RL_ASSIGN_OR_RETURN(std::string fsync, ServerFsync(o_.connect));
    policies = {fsync};
  }
  for (const std::string& fsync : policies) {
    std::string mode = RedisFsyncFor(fsync);
    bool started = false;
    for (const auto& r : redis_) started = started || r->appendfsync() == mode;
    if (started) continue;
    RL_ASSIGN_OR_RETURN(auto target, RedisTarget::Start(binary, mode));
    spdlog::info("redis-server {} on 127.0.0.1:{}, append-only file {}", binary, target->port(),
                 mode == "off" ? "off" : "with appendfsync " + mode);
    redis_.push_back(std::move(target));
  }
  return Status::OK();
}

Status Profiler::MeasureFloor(const Workload& w, Series* floor) {
  uint64_t trips = (w.rows + w.batch - 1) / w.batch;
  uint64_t consumer_trips = (trips * w.producers + w.consumers - 1) / w.consumers;
  struct Shape {
    const char* op;
    FloorShape s;
  };
  const Shape shapes[] = {
      {"put", {w.producers, trips, w.batch * w.row_bytes, kReplyBytes, w.batch, w.phase_limit_s, w.stop}},
      {"get", {w.consumers, consumer_trips, kReplyBytes, w.batch * w.row_bytes, w.batch, w.phase_limit_s, w.stop}},
      {"ack", {w.consumers, consumer_trips, w.batch * kIndexBytes + kReplyBytes, kReplyBytes, w.batch,
               w.phase_limit_s, w.stop}},
  };
  for (const Shape& shape : shapes) {
    RL_ASSIGN_OR_RETURN(OpFigure fig, MeasureZmqFloor(shape.s));
    floor->Add(shape.op, std::move(fig));
  }
  return Status::OK();
}

Status Profiler::MeasureQueue(const DriverFactory& make, const Workload& w, int run, Series* series) {
  auto progress = [&](const std::string& phase) {
    spdlog::info("{}, {} B rows, fsync {}, run {}/{}: {}", series->system, w.row_bytes, series->fsync, run, o_.runs,
                 phase);
  };
  RL_ASSIGN_OR_RETURN(WorkloadRun r, RunWorkload(make, w, progress));
  if (!r.ExactlyOnce()) {
    spdlog::warn("{}: {} of {} rows consumed, {} duplicates{}", series->system, r.consumed, r.expected, r.duplicates,
                 r.timed_out ? ", a phase ran out of time" : "");
  }
  series->AddRun(r);
  return Status::OK();
}

Result<std::unique_ptr<QueueTarget>> Profiler::StartQueue(const std::string& fsync) {
  if (!o_.connect.empty()) return QueueTarget::External(o_.connect);
  if (o_.in_process) return QueueTarget::StartThread(fsync);
  std::string binary = FindRlQueue();
  if (binary.empty()) {
    spdlog::warn("no rl-queue binary beside rl-profile or on PATH: serving from a thread of this process");
    return QueueTarget::StartThread(fsync);
  }
  return QueueTarget::StartProcess(binary, fsync);
}

// A fresh server for every run: each starts from an empty log.
Status Profiler::MeasureRlQueue(const Workload& w, int run, Series* series) {
  RL_ASSIGN_OR_RETURN(auto target, StartQueue(series->fsync));
  if (!o_.connect.empty()) {
    RL_ASSIGN_OR_RETURN(series->fsync, ServerFsync(o_.connect));
  }
  spdlog::debug("rl-queue ({}) at {}, fsync {}", target->kind(), target->endpoint(), series->fsync);
  Status s = MeasureQueue(RlQueueDrivers(target->endpoint(), kClientGiveUpS), w, run, series);
  if (!s.ok()) {
    Status alive = target->Alive();
    return alive.ok() ? s : alive.WithContext(s.message());
  }
  return target->Stop();
}

// Runs alternate between the systems, so a change in the machine's load falls on all of them.
Result<std::vector<Figure>> Profiler::MeasureRowSize(size_t row_bytes) {
  Workload w = o_.workload;
  w.stop = o_.stop;
  w.row_bytes = row_bytes;
  w.rows = o_.rows ? o_.rows : DefaultRows(row_bytes, w.batch);
  Series floor{kSystemZmq, "none"};
  std::vector<Series> redis, queues;
  for (const auto& r : redis_) redis.emplace_back(kSystemRedis, r->appendfsync());
  for (const std::string& fsync : o_.connect.empty() ? o_.fsync : std::vector<std::string>{"server"}) {
    queues.emplace_back(kSystemQueue, fsync);
  }
  for (int run = 1; run <= o_.runs; ++run) {
    spdlog::info("zmq floor, {} B rows, run {}/{}", row_bytes, run, o_.runs);
    RL_RETURN_IF_ERROR(MeasureFloor(w, &floor));
    for (size_t i = 0; i < redis_.size(); ++i) {
      RL_RETURN_IF_ERROR(MeasureQueue(hooks_.redis_drivers(redis_[i]->port()), w, run, &redis[i]));
    }
    for (Series& q : queues) RL_RETURN_IF_ERROR(MeasureRlQueue(w, run, &q));
  }
  std::vector<Figure> figs;
  floor.AppendFigures(w, &figs);
  for (Series& r : redis) r.AppendFigures(w, &figs);
  for (Series& q : queues) q.AppendFigures(w, &figs);
  AddRatios(&figs);
  return figs;
}

void Profiler::Print(const std::vector<Figure>& figs) {
  for (const Figure& f : figs) {
    if (o_.json) {
      out_ << FigureJson(f) << "\n";
    } else {
      PrintTableRow(f, out_);
    }
  }
  out_.flush();
}

// Ack rows/s of rl-queue over Redis's XACK, one at a time and pipelined, per fsync policy and row
// size: "# ack rows/s rl-queue (fsync batch) / Redis XACK (appendfsync everysec), 1024 B rows:
// one at a time 0.52, window 8 1.40 (over Redis pipelined alike 0.90)".
void Profiler::PrintAckVerdict(const std::vector<Figure>& all) {
  auto find = [&](const std::string& system, const std::string& op, const std::string& fsync, size_t row_bytes) {
    for (const Figure& f : all) {
      if (f.system == system && f.op == op && f.fsync == fsync && f.row_bytes == row_bytes) return &f;
    }
    return static_cast<const Figure*>(nullptr);
  };
  for (const Figure& f : all) {
    if (f.system != kSystemQueue || f.op != "ack") continue;
    std::string redis_fsync = RedisFsyncFor(f.fsync);
    const Figure* redis = find(kSystemRedis, "ack", redis_fsync, f.row_bytes);
    if (redis == nullptr || redis->rows_per_s <= 0) continue;
    std::string line = Printf("# ack rows/s rl-queue (fsync %s) / Redis XACK (%s), %zu B rows: one at a time %.2f",
                              f.fsync.c_str(),
                              redis_fsync == "off" ? "persistence off" : ("appendfsync " + redis_fsync).c_str(),
                              f.row_bytes, f.rows_per_s / redis->rows_per_s);
    const Figure* piped = find(kSystemQueue, "ack-pipelined", f.fsync, f.row_bytes);
    const Figure* redis_piped = find(kSystemRedis, "ack-pipelined", redis_fsync, f.row_bytes);
    if (piped != nullptr) {
      line += Printf(", window %d %.2f", o_.workload.ack_window, piped->rows_per_s / redis->rows_per_s);
      if (redis_piped != nullptr && redis_piped->rows_per_s > 0) {
        line += Printf(" (over Redis pipelined alike %.2f)", piped->rows_per_s / redis_piped->rows_per_s);
      }
    }
    out_ << line << "\n";
  }
}

// The acceptance figures, per row size: end-to-end rows/s of rl-queue over Redis streams under
// the closest persistence policies, and of the durable policies over never, against their targets.
void Profiler::PrintVerdict(const std::vector<Figure>& all) {
  for (const Figure& f : all) {
    if (f.system != kSystemQueue || f.op != "e2e") continue;
    char buf[200];
    if (f.redis_rows_per_s) {
      std::string redis = RedisFsyncFor(f.fsync);
      std::snprintf(buf, sizeof(buf), "# e2e rows/s rl-queue (fsync %s) / Redis streams (%s), %zu B rows: %.2f (%s)\n",
                    f.fsync.c_str(), redis == "off" ? "persistence off" : ("appendfsync " + redis).c_str(),
                    f.row_bytes, *f.redis_rows_per_s, *f.redis_rows_per_s >= 1 ? "at least equal" : "slower");
      out_ << buf;
    }
    double target = f.fsync == "batch" ? 0.8 : f.fsync == "always" ? 0.5 : 0;
    if (f.never_rows_per_s && target > 0) {
      std::snprintf(buf, sizeof(buf), "# e2e rows/s rl-queue fsync %s / fsync never, %zu B rows: %.2f (target %.1f: %s)\n",
                    f.fsync.c_str(), f.row_bytes, *f.never_rows_per_s, target,
                    *f.never_rows_per_s >= target ? "met" : "missed");
      out_ << buf;
    }
  }
}

Result<std::vector<Figure>> Profiler::Run() {
  WarnWhenBusy();
  RL_RETURN_IF_ERROR(StartRedis());
  if (!o_.json) PrintTableHeader(out_);
  std::vector<Figure> all;
  for (size_t row_bytes : o_.row_bytes) {
    RL_ASSIGN_OR_RETURN(std::vector<Figure> figs, MeasureRowSize(row_bytes));
    Print(figs);
    all.insert(all.end(), figs.begin(), figs.end());
  }
  for (auto& r : redis_) RL_RETURN_IF_ERROR(r->Stop());
  if (!o_.json) {
    PrintVerdict(all);
    PrintAckVerdict(all);
  }
  return all;
}

}  // namespace

uint64_t DefaultRows(size_t row_bytes, size_t batch) {
  uint64_t rows = std::min<uint64_t>(kDefaultMaxRows, kDefaultBytesPerProducer / std::max<size_t>(row_bytes, 1));
  return std::max<uint64_t>(rows, 4 * batch);
}

Result<std::vector<Figure>> RunQueueProfile(const QueueProfileOptions& options, const ProfileHooks& hooks,
                                            std::ostream& out) {
  QueueProfileOptions o = options;
  if (o.runs <= 0) o.runs = o.rows ? 1 : kDefaultRuns;  // --rows asks for a short run
  return Profiler(o, hooks, out).Run();
}

}  // namespace rl::profile
