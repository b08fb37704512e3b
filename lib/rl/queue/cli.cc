#include "rl/queue/cli.h"

#include <iostream>

#include "rl/core/fail.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/health/flags.h"

namespace rl::queue {

ClientOptions ClientFlags::ToOptions() const {
  ClientOptions o;
  o.endpoint = connect;
  o.give_up_s = timeout_s;
  o.sender = NewSenderId("rl-queue");
  return o;
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t end = s.find(',', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

int Fail(const Status& s) { return rl::Fail("rl-queue", s); }

namespace {

void BindClient(CommandLine& cl, CLI::App* sub, ClientFlags* c) {
  cl.Bind(sub, "--connect", &c->connect);
  cl.Bind(sub, "--timeout", &c->timeout_s);
}

}  // namespace

int QueueMain(int argc, char** argv) {
  CommandLine cl("rl-queue", "rl-queue: durable streaming sample store with task controllers (see man rl-queue)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);

  ServerOptions so;
  std::string run_dir, id = "0", fsync = "batch";
  std::vector<std::string> declares;
  CLI::App* serve = cl.Sub("serve", "run the server");
  cl.Bind(serve, "--bind", &so.bind);
  cl.Require(cl.Bind(serve, "--dir", &so.dir));
  cl.Bind(serve, "--fsync", &fsync);
  cl.Bind(serve, "--fsync-interval-ms", &so.fsync_interval_ms)->check(CLI::Range(0, 60000));
  cl.Bind(serve, "--max-message", &so.max_message);
  cl.Bind(serve, "--snapshot-bytes", &so.snapshot_bytes);
  cl.Bind(serve, "--declare", &declares);
  cl.Bind(serve, "--run-dir", &run_dir);
  cl.Bind(serve, "--id", &id);
  std::string units;
  cl.Bind(serve, "--units", &units);
  cl.Bind(serve, "--unit-grace-ms", &so.unit_grace_ms)->check(CLI::Range(int64_t{1000}, int64_t{86400000}));
  cl.Bind(serve, "--unit-min-bytes", &so.unit_min_bytes)->check(CLI::Range(uint64_t{1}, uint64_t{1} << 30));
  health::HeartbeatFlags heartbeat;
  heartbeat.Bind(cl, serve);
  CLI::App* unit = cl.Sub("unit", "run a storage unit: row data for the controller 'serve --units' names it in");
  cl.Bind(unit, "--bind", &so.bind);
  cl.Require(cl.Bind(unit, "--dir", &so.dir));
  cl.Bind(unit, "--fsync", &fsync);
  cl.Bind(unit, "--fsync-interval-ms", &so.fsync_interval_ms)->check(CLI::Range(0, 60000));
  cl.Bind(unit, "--max-message", &so.max_message);
  cl.Bind(unit, "--snapshot-bytes", &so.snapshot_bytes);
  cl.Bind(unit, "--run-dir", &run_dir);
  cl.Bind(unit, "--id", &id);
  heartbeat.Bind(cl, unit);

  ClientFlags c;
  PutFlags pf;
  CLI::App* put = cl.Sub("put", "add rows from JSON lines on stdin; prints each acknowledged row's index");
  BindClient(cl, put, &c);
  cl.Bind(put, "--batch", &pf.batch)->check(CLI::Range(1, 100000));
  cl.Bind(put, "--repeat", &pf.repeat)->check(CLI::Range(1, 4096));
  cl.Bind(put, "--update", &pf.update);
  cl.Bind(put, "--renew", &pf.renew_s)->check(CLI::Range(0.0, kMaxRenewMs / 1000.0));
  cl.Bind(put, "--window", &pf.window)->check(CLI::Range(1, 64));

  GetRequest gr;
  std::string columns, also, on_stale = "drop";
  double lease_s = 60, wait_s = 0;
  int64_t min_version = 0;
  CLI::App* get = cl.Sub("get", "lease ready rows of a task; prints them as JSON lines");
  BindClient(cl, get, &c);
  cl.Require(cl.Bind(get, "--task", &gr.task));
  cl.Bind(get, "--columns", &columns);
  cl.Bind(get, "--also", &also);
  cl.Bind(get, "--count", &gr.count)->check(CLI::Range(1, 1000000));
  cl.Bind(get, "--min", &gr.min);
  cl.Bind(get, "--lease", &lease_s)->check(kLeaseSeconds);
  cl.Bind(get, "--wait", &wait_s)->check(CLI::Range(0.0, 3600.0));
  cl.BindFlag(get, "--groups", &gr.groups);
  CLI::Option* mv = cl.Bind(get, "--min-version", &min_version);
  cl.Bind(get, "--on-stale", &on_stale)->check(CLI::IsMember({"drop", "regenerate"}));
  cl.Bind(get, "--drop-uniform", &gr.drop_uniform);
  cl.Bind(get, "--balance", &gr.balance);
  cl.Bind(get, "--parts", &gr.parts)->check(CLI::Range(1, 64));
  cl.Bind(get, "--holder", &gr.holder);

  std::string task, holder;
  uint64_t lease_id = 0;
  std::vector<std::string> indices;
  CLI::App* ack = cl.Sub("ack", "consume rows for a task: indices as arguments or on stdin");
  CLI::App* nack = cl.Sub("nack", "give leased rows back: indices as arguments or on stdin (none: the whole lease), "
                                   "or every lease of --holder");
  for (CLI::App* sub : {ack, nack}) {
    BindClient(cl, sub, &c);
    cl.Require(cl.Bind(sub, "--task", &task));
    cl.Bind(sub, "--lease-id", &lease_id);
    sub->add_option("indices", indices, "row indices");
  }
  CLI::Option* nack_holder = cl.Bind(nack, "--holder", &holder);

  bool json = false;
  CLI::App* stat = cl.Sub("stat", "per task: ready, leased, consumed, dropped; log and snapshot sizes");
  BindClient(cl, stat, &c);
  cl.BindFlag(stat, "--json", &json);

  std::vector<std::string> meta_args;
  std::string if_equals;
  CLI::App* meta = cl.Sub("meta", "run metadata: 'meta get KEY' or 'meta set KEY VALUE'");
  BindClient(cl, meta, &c);
  CLI::Option* ie = cl.Bind(meta, "--if-equals", &if_equals);
  meta->add_option("args", meta_args, "get KEY | set KEY VALUE")->required();

  bool optional = false;
  CLI::App* taskcmd = cl.Sub("task", "declare a task and the columns it needs");
  BindClient(cl, taskcmd, &c);
  cl.Require(cl.Bind(taskcmd, "--task", &task));
  cl.Require(cl.Bind(taskcmd, "--columns", &columns));
  cl.BindFlag(taskcmd, "--optional", &optional);

  CLI::App* retire = cl.Sub("retire", "remove a task for good: it no longer keeps rows alive; prints the rows freed");
  BindClient(cl, retire, &c);
  cl.Require(cl.Bind(retire, "--task", &task));

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging("rl-queue", log_level); !s.ok()) return Fail(s);

  if (serve->parsed() || unit->parsed()) {
    auto policy = ParseFsyncPolicy(fsync);
    if (!policy.ok()) return Fail(policy.status());
    so.fsync = *policy;
    so.unit = unit->parsed();
    so.units = SplitList(units);
    if (so.unit) {
      // A unit heartbeats as kind "unit": rl-watchdog supervises it as a role of its own.
      auto beat = heartbeat.Start("unit", id, {{"bind", so.bind}});
      if (!beat.ok()) return Fail(beat.status());
      return RunServe(std::move(so), run_dir, id);
    }
    for (const auto& d : declares) {
      size_t eq = d.find('=');
      if (eq == std::string::npos || eq == 0) return Fail(Status::InvalidArgument("--declare wants NAME=COL1,COL2, not '" + d + "'"));
      so.declare.push_back({d.substr(0, eq), SplitList(d.substr(eq + 1))});
    }
    auto beat = heartbeat.Start("queue", id, {{"bind", so.bind}});
    if (!beat.ok()) return Fail(beat.status());
    return RunServe(std::move(so), run_dir, id);
  }
  if (put->parsed()) return RunPut(c, pf, std::cin, std::cout);
  if (get->parsed()) {
    gr.columns = SplitList(columns);
    gr.also = SplitList(also);
    gr.lease_ms = static_cast<int64_t>(lease_s * 1000);
    gr.wait_ms = static_cast<int64_t>(wait_s * 1000);
    gr.has_min_version = mv->count() > 0;
    gr.min_version = min_version;
    gr.regenerate_stale = on_stale == "regenerate";
    return RunGet(c, gr, std::cout);
  }
  if (nack->parsed() && nack_holder->count() > 0) return RunReleaseHolder(c, task, holder, lease_id, indices, std::cout);
  if (ack->parsed() || nack->parsed()) return RunAckOrNack(c, ack->parsed(), task, lease_id, indices, std::cin, std::cout);
  if (stat->parsed()) return RunStat(c, json, std::cout);
  if (meta->parsed()) return RunMeta(c, meta_args, if_equals, ie->count() > 0, std::cout);
  if (taskcmd->parsed()) return RunTask(c, task, SplitList(columns), optional);
  if (retire->parsed()) return RunRetire(c, task, std::cout);
  return kExitUsage;
}

}  // namespace rl::queue
