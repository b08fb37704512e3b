#include "rl/profile/units_profile.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <memory>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "rl/core/log.h"
#include "rl/profile/child_process.h"
#include "rl/profile/queue_driver.h"
#include "rl/profile/queue_target.h"
#include "rl/queue/client.h"

namespace rl::profile {
namespace {

constexpr int kStartTimeoutMs = 10000;
constexpr char kMaxMessage[] = "536870912";  // a TransferQueue-sized put (1024 rows of 10 x 32 KiB) fits

// The CPU seconds (user + system) process `pid` has used so far.
Result<double> CpuSeconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return Status::IOError("cannot read /proc/" + std::to_string(pid) + "/stat");
  std::istringstream rest(stat.substr(paren + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15: utime, stime (ticks)
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return static_cast<double>(utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

Status Ping(const std::string& endpoint) {
  ClientOptions o;
  o.endpoint = endpoint;
  o.give_up_s = 0.3;
  o.attempt_timeout_ms = 300;
  o.backoff_min_ms = 20;
  queue::QueueClient client(o);
  return client.Ping();
}

// A server process of the run (a unit or the controller) over a directory of its own.
struct Proc {
  std::string endpoint, dir;
  std::optional<ChildProcess> child;
  ~Proc() {
    if (child) (void)child->Stop(5000);
    if (!dir.empty()) RemoveTree(dir);
  }
};

Result<std::unique_ptr<Proc>> Start(const std::string& binary, std::vector<std::string> args) {
  auto p = std::make_unique<Proc>();
  RL_ASSIGN_OR_RETURN(p->dir, MakeTempDir("rl-profile-units"));
  RL_ASSIGN_OR_RETURN(int port, FreeTcpPort());
  p->endpoint = "tcp://127.0.0.1:" + std::to_string(port);
  std::vector<std::string> argv = {binary, "--log-level", "warn"};
  argv.insert(argv.end(), args.begin(), args.end());
  argv.insert(argv.end(), {"--bind", p->endpoint, "--dir", p->dir, "--max-message", kMaxMessage});
  RL_ASSIGN_OR_RETURN(ChildProcess child, ChildProcess::Spawn(argv));
  p->child.emplace(std::move(child));
  std::string endpoint = p->endpoint;
  RL_RETURN_IF_ERROR(p->child->WaitReady(kStartTimeoutMs, [endpoint] { return Ping(endpoint); }));
  return p;
}

// The bytes of a tensor of a get reply read in place: inline (ext 1) or in a frame (ext 2).
std::string_view TensorData(const msgpack::object* o, const std::vector<std::string_view>& blobs) {
  if (o == nullptr || o->type != msgpack::type::EXT || o->via.ext.size < 2) return {};
  const char* p = o->via.ext.data();
  size_t head = 2 + 8 * static_cast<uint8_t>(p[1]);
  if (o->via.ext.size < head) return {};
  if (o->via.ext.type() == kExtTensorInline) return std::string_view(p + head, o->via.ext.size - head);
  if (o->via.ext.type() != kExtTensorFrame || o->via.ext.size != head + 4) return {};
  uint32_t frame;
  std::memcpy(&frame, p + head, 4);
  return frame < blobs.size() ? blobs[frame] : std::string_view();
}

// Rows of `fields` int32 tensors of `tokens` each; f0 is the payload (the put time first).
class FieldsDriver : public QueueDriver {
 public:
  FieldsDriver(ClientOptions o, int fields, int tokens) : client_(std::move(o)), fields_(fields), tokens_(tokens) {
    filler_.dtype = DType::kI32;
    filler_.shape = {tokens};
    filler_.data.assign(4 * static_cast<size_t>(tokens), '\x07');
  }
  Status Prepare() override {
    std::vector<std::string> cols;
    for (int f = 0; f < fields_; ++f) cols.push_back("f" + std::to_string(f));
    return client_.Declare(kBenchTask, cols);
  }
  Status Put(const std::vector<std::string>& payloads) override {
    queue::PutRequest req;
    req.rows.resize(payloads.size());
    for (size_t r = 0; r < payloads.size(); ++r) {
      auto& cols = req.rows[r].columns;
      cols.emplace_back("f0", Tensor{DType::kI32, {tokens_}, payloads[r]});
      for (int f = 1; f < fields_; ++f) cols.emplace_back("f" + std::to_string(f), filler_);
    }
    RL_ASSIGN_OR_RETURN(std::vector<uint64_t> done, client_.Put(req));
    return done.size() == payloads.size() ? Status::OK() : Status::Protocol("put reply names other rows");
  }
  Status Get(size_t max, int wait_ms, Taken* out) override {
    out->Clear();
    queue::GetRequest req;
    req.task = kBenchTask;
    req.count = static_cast<uint32_t>(max);
    req.min = 1;
    req.wait_ms = wait_ms;
    req.lease_ms = 300000;
    RL_ASSIGN_OR_RETURN(queue::GetReplyView reply, client_.GetView(req));
    out->lease = reply.lease;
    for (const auto& row : reply.rows) {
      out->indices.push_back(row.index);
      RL_ASSIGN_OR_RETURN(MapView cols, MapView::Of(*row.columns, "row"));
      std::string_view f0 = TensorData(cols.Find("f0"), reply.blobs);
      out->stamps_ns.push_back(PayloadStamp(f0.data(), f0.size()));
    }
    return Status::OK();
  }
  Status Ack(const Taken& taken) override {
    RL_ASSIGN_OR_RETURN(queue::IndexReply r, client_.Ack(kBenchTask, taken.lease, taken.indices));
    return r.rejected.empty() ? Status::OK() : Status::Conflict("ack rejected rows");
  }

 private:
  queue::QueueClient client_;
  int fields_;
  int64_t tokens_;
  Tensor filler_;
};

DriverFactory FieldsDrivers(const std::string& endpoint, int fields, int tokens) {
  return [=](int client) -> Result<std::unique_ptr<QueueDriver>> {
    ClientOptions o;
    o.endpoint = endpoint;
    o.give_up_s = 120;
    o.attempt_timeout_ms = 30000;  // a reply of hundreds of MiB takes a while on a loaded machine
    o.sender = NewSenderId("rl-profile-units-" + std::to_string(client));
    return std::unique_ptr<QueueDriver>(new FieldsDriver(std::move(o), fields, tokens));
  };
}

Result<UnitsFigure> RunOne(const std::string& binary, const UnitsProfileOptions& o, int n) {
  std::vector<std::unique_ptr<Proc>> units;
  std::string list;
  for (int u = 0; u < n; ++u) {
    RL_ASSIGN_OR_RETURN(auto p, Start(binary, {"unit", "--fsync", o.fsync}));
    list += (list.empty() ? "" : ",") + p->endpoint;
    units.push_back(std::move(p));
  }
  std::vector<std::string> serve = {"serve", "--fsync", o.fsync};
  if (n > 0) serve.insert(serve.end(), {"--units", list});
  RL_ASSIGN_OR_RETURN(auto controller, Start(binary, serve));
  auto cpu = [&](double* ctrl, double* unit) -> Status {
    RL_ASSIGN_OR_RETURN(*ctrl, CpuSeconds(controller->child->pid()));
    *unit = 0;
    for (const auto& u : units) {
      RL_ASSIGN_OR_RETURN(double s, CpuSeconds(u->child->pid()));
      *unit += s;
    }
    return Status::OK();
  };
  double c0, u0, c1, u1;
  RL_RETURN_IF_ERROR(cpu(&c0, &u0));
  Workload w = o.workload;
  w.row_bytes = 4 * static_cast<size_t>(o.tokens);
  w.rows = w.rows ? w.rows : UnitsDefaultRows(o);
  w.stop = o.stop;
  RL_ASSIGN_OR_RETURN(WorkloadRun run, RunWorkload(FieldsDrivers(controller->endpoint, o.fields, o.tokens), w,
                                                   [n](const std::string& phase) {
                                                     spdlog::info("units {}: {}", n, phase);
                                                   }));
  RL_RETURN_IF_ERROR(cpu(&c1, &u1));
  UnitsFigure f;
  f.units = n;
  f.rows = run.expected;
  f.rows_per_s = run.e2e.RowsPerSecond();
  f.put_rows_per_s = run.put.RowsPerSecond();
  f.get_rows_per_s = run.get.RowsPerSecond();
  f.controller_cpu_us = run.expected ? (c1 - c0) * 1e6 / run.expected : 0;
  f.unit_cpu_us = run.expected ? (u1 - u0) * 1e6 / run.expected : 0;
  f.exactly_once = run.ExactlyOnce();
  return f;
}

void Print(const UnitsProfileOptions& o, const UnitsFigure& f, std::ostream& out) {
  // Units one controller serves before it is the bottleneck: a unit's CPU per row over its own.
  double serves = f.units > 0 && f.controller_cpu_us > 0 ? f.unit_cpu_us / f.controller_cpu_us : 0;
  if (o.json) {
    out << nlohmann::json({{"units", f.units}, {"fields", o.fields}, {"tokens", o.tokens},
                           {"batch", o.workload.batch}, {"rows", f.rows}, {"rows_per_s", f.rows_per_s},
                           {"put_rows_per_s", f.put_rows_per_s}, {"get_rows_per_s", f.get_rows_per_s},
                           {"controller_cpu_us_per_row", f.controller_cpu_us}, {"unit_cpu_us_per_row", f.unit_cpu_us},
                           {"units_per_controller", serves}, {"exactly_once", f.exactly_once}})
               .dump()
        << "\n";
  } else {
    char line[200];
    std::snprintf(line, sizeof(line), "%5d %10.0f %10.0f %10.0f %12.1f %12.1f %9.1f %5s\n", f.units, f.rows_per_s,
                  f.put_rows_per_s, f.get_rows_per_s, f.controller_cpu_us, f.unit_cpu_us, serves,
                  f.exactly_once ? "yes" : "NO");
    out << line;
  }
  out.flush();
}

}  // namespace

uint64_t UnitsDefaultRows(const UnitsProfileOptions& o) {
  uint64_t row = 4ull * o.tokens * o.fields;
  uint64_t batch = o.workload.batch;
  uint64_t rows = (128ull << 20) / std::max<uint64_t>(1, row * o.workload.producers);
  rows = std::max(rows / batch, uint64_t{2}) * batch;
  return std::min<uint64_t>(rows, 8192);
}

Result<std::vector<UnitsFigure>> RunUnitsProfile(const UnitsProfileOptions& o, std::ostream& out) {
  std::string binary = FindRlQueue();
  if (binary.empty()) return Status::Unavailable("no rl-queue binary beside rl-profile or on PATH");
  if (o.fields < 1 || o.tokens < 2) return Status::InvalidArgument("--fields at least 1, --tokens at least 2");
  if (!o.json) {
    out << "rl-queue storage units: " << o.fields << " fields x " << o.tokens << " int32 tokens per row, batch "
        << o.workload.batch << ", " << o.workload.producers << " producers, " << o.workload.consumers
        << " consumers, fsync " << o.fsync << "\n";
    out << "units   rows/s   put rows/s get rows/s  ctrl us/row  units us/row   serves  once\n";
  }
  std::vector<UnitsFigure> figures;
  for (int n : o.units) {
    if (o.stop && o.stop->load()) break;
    RL_ASSIGN_OR_RETURN(UnitsFigure f, RunOne(binary, o, n));
    Print(o, f, out);
    figures.push_back(f);
  }
  return figures;
}

}  // namespace rl::profile
