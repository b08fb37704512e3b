#include "rl/profile/cli.h"

#include <iostream>

#include "rl/core/fail.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/signals.h"
#include "rl/profile/plan_cmd.h"
#include "rl/profile/report_cmd.h"
#include "rl/profile/units_profile.h"
#include "rl/profile/weights_profile.h"

namespace rl::profile {
namespace {

constexpr char kTool[] = "rl-profile";

void BindQueue(CommandLine& cl, CLI::App* queue, QueueProfileOptions* o) {
  Workload& w = o->workload;
  cl.Bind(queue, "--producers", &w.producers)->check(CLI::Range(1, 64));
  cl.Bind(queue, "--consumers", &w.consumers)->check(CLI::Range(1, 64));
  cl.Bind(queue, "--rows", &o->rows)->check(CLI::Range(uint64_t{0}, uint64_t{100000000}));
  cl.Bind(queue, "--row-bytes", &o->row_bytes)->delimiter(',')->check(CLI::Range(size_t{8}, size_t{16} << 20));
  cl.Bind(queue, "--batch", &w.batch)->check(CLI::Range(1, 100000));
  w.ack_window = 8;  // as rl-queue put's default
  cl.Bind(queue, "--window", &w.ack_window)->check(CLI::Range(1, 64));
  cl.Bind(queue, "--runs", &o->runs)->check(CLI::Range(0, 100));
  cl.Bind(queue, "--fsync", &o->fsync)->delimiter(',')->check(CLI::IsMember({"always", "batch", "never"}));
  cl.Bind(queue, "--redis", &o->redis);
  cl.Bind(queue, "--connect", &o->connect);
  cl.BindFlag(queue, "--in-process", &o->in_process);
  cl.BindFlag(queue, "--json", &o->json);
}

// rl-profile queue --unit-counts: the workload options of the queue benchmark, over storage units.
int RunUnits(const QueueProfileOptions& qo, UnitsProfileOptions uo) {
  uo.workload = qo.workload;
  uo.workload.rows = qo.rows;
  uo.fsync = qo.fsync.size() == 1 ? qo.fsync[0] : "batch";  // one policy given, else batch
  uo.json = qo.json;
  uo.stop = &InstallStopSignals();
  auto figures = RunUnitsProfile(uo, std::cout);
  if (!figures.ok()) return Fail(kTool, figures.status());
  for (const UnitsFigure& f : *figures) {
    if (!f.exactly_once) return Fail(kTool, Status::Internal("a run did not consume every row exactly once"));
  }
  return kExitOk;
}

}  // namespace

int ProfileMain(int argc, char** argv, const ProfileHooks& hooks, const std::vector<SubcommandFactory>& extra) {
  CommandLine cl(kTool, "rl-profile: measurements of roleflow (see man rl-profile)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);

  QueueProfileOptions qo;
  UnitsProfileOptions uo;
  CLI::App* queue = cl.Sub("queue",
                           "benchmark rl-queue: put, get, ack and end-to-end rows/s and latency, against the ZeroMQ "
                           "floor and Redis streams in the same run");
  BindQueue(cl, queue, &qo);
  CLI::Option* unit_counts = cl.Bind(queue, "--unit-counts", &uo.units)->delimiter(',')->check(CLI::Range(0, 64));
  cl.Bind(queue, "--fields", &uo.fields)->check(CLI::Range(1, 64));
  cl.Bind(queue, "--tokens", &uo.tokens)->check(CLI::Range(2, 1 << 20));
  // Subcommands in files of their own; one line each.
  WeightsProfileOptions weights_options;
  std::vector<Subcommand> more = {AddWeightsProfile(cl, &weights_options)};
  more.push_back(AddReportCommand(cl));
  more.push_back(AddPlanCommand(cl));
  for (const SubcommandFactory& add : extra) more.push_back(add(cl));

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);
  for (const Subcommand& sub : more) {
    if (sub.app->parsed()) return sub.run();
  }
  if (queue->parsed() && unit_counts->count() > 0) return RunUnits(qo, std::move(uo));
  if (queue->parsed()) {
    if (qo.row_bytes.empty() || qo.fsync.empty()) return Fail(kTool, Status::InvalidArgument("--row-bytes and --fsync need a value"));
    qo.stop = &InstallStopSignals();  // ^C ends the run early and still stops the servers
    auto figures = RunQueueProfile(qo, hooks, std::cout);
    if (!figures.ok()) return Fail(kTool, figures.status());
    for (const Figure& f : *figures) {
      if (f.exactly_once == false) {
        return Fail(kTool, Status::Internal(f.system + " did not consume every row exactly once (see the 'once' column)"));
      }
    }
    return kExitOk;
  }
  return kExitUsage;
}

}  // namespace rl::profile
