#include "rl/profile/queue_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "rl/core/log.h"
#include "rl/profile/queue_driver.h"
#include "rl/profile/queue_target.h"
#include "rl/profile/redis_target.h"
#include "rl/profile/zmq_floor.h"
#include "rl/queue/client.h"

namespace rl::profile {
namespace {

constexpr uint64_t kDefaultBytesPerProducer = 64u << 20;
constexpr uint64_t kDefaultMaxRows = 16384;
constexpr size_t kReplyBytes = 64;       // a put or ack reply, roughly
constexpr size_t kIndexBytes = 9;        // a msgpack u64 row index
constexpr double kClientGiveUpS = 30;

Result<std::string> ServerFsync(const std::string& endpoint) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.give_up_s = 10;
  queue::QueueClient client(o);
  RL_ASSIGN_OR_RETURN(nlohmann::json stat, client.Stat());
  return stat.value("fsync", std::string("unknown"));
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

class Profiler {
 public:
  Profiler(const QueueProfileOptions& o, const ProfileHooks& hooks, std::ostream& out)
      : o_(o), hooks_(hooks), out_(out) {}
  Result<std::vector<Figure>> Run();

 private:
  Status StartRedis();
  Status MeasureFloor(const Workload& w, std::vector<Figure>* figs);
  Status MeasureRlQueue(const std::string& fsync, const Workload& w, std::vector<Figure>* figs);
  Status MeasureSystem(const std::string& system, const std::string& fsync, const DriverFactory& make,
                       const Workload& w, std::vector<Figure>* figs);
  Result<std::unique_ptr<QueueTarget>> StartQueue(const std::string& fsync);
  void Print(const std::vector<Figure>& figs);
  void PrintVerdict(const std::vector<Figure>& all);

  QueueProfileOptions o_;
  ProfileHooks hooks_;
  std::ostream& out_;
  std::unique_ptr<RedisTarget> redis_;
};

Figure Describe(Figure f, const std::string& fsync, const Workload& w) {
  f.row_bytes = w.row_bytes;
  f.batch = w.batch;
  f.fsync = fsync;
  f.producers = w.producers;
  f.consumers = w.consumers;
  return f;
}

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
  RL_ASSIGN_OR_RETURN(redis_, RedisTarget::Start(binary));
  spdlog::info("redis-server {} on 127.0.0.1:{}, persistence off", binary, redis_->port());
  return Status::OK();
}

Status Profiler::MeasureFloor(const Workload& w, std::vector<Figure>* figs) {
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
    spdlog::info("zmq floor, {} B rows: {}", w.row_bytes, shape.op);
    RL_ASSIGN_OR_RETURN(OpFigure fig, MeasureZmqFloor(shape.s));
    figs->push_back(Describe(MakeFigure(kSystemZmq, shape.op, &fig), "none", w));
  }
  return Status::OK();
}

Status Profiler::MeasureSystem(const std::string& system, const std::string& fsync, const DriverFactory& make,
                               const Workload& w, std::vector<Figure>* figs) {
  auto progress = [&](const std::string& phase) {
    spdlog::info("{}, {} B rows, fsync {}: {}", system, w.row_bytes, fsync, phase);
  };
  RL_ASSIGN_OR_RETURN(WorkloadRun run, RunWorkload(make, w, progress));
  if (!run.ExactlyOnce()) {
    spdlog::warn("{}: {} of {} rows consumed, {} duplicates{}", system, run.consumed, run.expected, run.duplicates,
                 run.timed_out ? ", a phase ran out of time" : "");
  }
  std::pair<const char*, OpFigure*> ops[] = {{"put", &run.put}, {"get", &run.get}, {"ack", &run.ack}, {"e2e", &run.e2e}};
  for (auto& [op, fig] : ops) {
    Figure f = Describe(MakeFigure(system, op, fig), fsync, w);
    f.exactly_once = run.ExactlyOnce();
    figs->push_back(f);
  }
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

Status Profiler::MeasureRlQueue(const std::string& fsync, const Workload& w, std::vector<Figure>* figs) {
  RL_ASSIGN_OR_RETURN(auto target, StartQueue(fsync));
  std::string label = fsync;
  if (!o_.connect.empty()) {
    RL_ASSIGN_OR_RETURN(label, ServerFsync(o_.connect));
  }
  spdlog::info("rl-queue ({}) at {}, fsync {}", target->kind(), target->endpoint(), label);
  Status s = MeasureSystem(kSystemQueue, label, RlQueueDrivers(target->endpoint(), kClientGiveUpS), w, figs);
  if (!s.ok()) {
    Status alive = target->Alive();
    return alive.ok() ? s : alive.WithContext(s.message());
  }
  return target->Stop();
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

// The acceptance figure: end-to-end rows/s of rl-queue over Redis streams, with fsync off on both.
void Profiler::PrintVerdict(const std::vector<Figure>& all) {
  for (const Figure& f : all) {
    if (f.system != kSystemQueue || f.op != "e2e" || f.fsync != "never" || !f.redis_rows_per_s) continue;
    char buf[200];
    std::snprintf(buf, sizeof(buf), "# e2e rows/s rl-queue (fsync never) / Redis streams, %zu B rows: %.2f (%s)\n",
                  f.row_bytes, *f.redis_rows_per_s, *f.redis_rows_per_s >= 1 ? "at least equal" : "slower");
    out_ << buf;
  }
}

Result<std::vector<Figure>> Profiler::Run() {
  WarnWhenBusy();
  RL_RETURN_IF_ERROR(StartRedis());
  if (!o_.json) PrintTableHeader(out_);
  std::vector<Figure> all;
  std::vector<std::string> policies = o_.connect.empty() ? o_.fsync : std::vector<std::string>{"server"};
  for (size_t row_bytes : o_.row_bytes) {
    Workload w = o_.workload;
    w.stop = o_.stop;
    w.row_bytes = row_bytes;
    w.rows = o_.rows ? o_.rows : DefaultRows(row_bytes, w.batch);
    std::vector<Figure> figs;
    RL_RETURN_IF_ERROR(MeasureFloor(w, &figs));
    if (redis_) RL_RETURN_IF_ERROR(MeasureSystem(kSystemRedis, "off", hooks_.redis_drivers(redis_->port()), w, &figs));
    for (const std::string& fsync : policies) RL_RETURN_IF_ERROR(MeasureRlQueue(fsync, w, &figs));
    AddRatios(&figs);
    Print(figs);
    all.insert(all.end(), figs.begin(), figs.end());
  }
  if (redis_) RL_RETURN_IF_ERROR(redis_->Stop());
  if (!o_.json) PrintVerdict(all);
  return all;
}

}  // namespace

uint64_t DefaultRows(size_t row_bytes, size_t batch) {
  uint64_t rows = std::min<uint64_t>(kDefaultMaxRows, kDefaultBytesPerProducer / std::max<size_t>(row_bytes, 1));
  return std::max<uint64_t>(rows, 4 * batch);
}

Result<std::vector<Figure>> RunQueueProfile(const QueueProfileOptions& options, const ProfileHooks& hooks,
                                            std::ostream& out) {
  return Profiler(options, hooks, out).Run();
}

}  // namespace rl::profile
