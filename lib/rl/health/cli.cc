#include "rl/health/cli.h"

#include <iostream>

#include "rl/core/clock.h"
#include "rl/core/event_log.h"
#include "rl/core/fail.h"
#include "rl/core/json_field.h"
#include "rl/core/log.h"
#include "rl/core/options.h"
#include "rl/core/signals.h"
#include "rl/health/standin.h"
#include "rl/health/supervisor.h"
#include "rl/health/watcher.h"

namespace rl::health {
namespace {

constexpr char kTool[] = "rl-watchdog";

struct DetectFlags {
  int missed = 3;
  double stall_train = 30, stall_rollout = 60, probe_window = 2;
  void Bind(CommandLine& cl, CLI::App* sub) {
    cl.Bind(sub, "--missed", &missed)->check(CLI::Range(1, 1000));
    cl.Bind(sub, "--stall-train", &stall_train)->check(kPositive);
    cl.Bind(sub, "--stall-rollout", &stall_rollout)->check(kPositive);
    cl.Bind(sub, "--probe-window", &probe_window)->check(CLI::Range(0.0, 60.0));
  }
  DetectorOptions Options() const {
    DetectorOptions o;
    o.missed = missed;
    o.stall_ms["train"] = static_cast<int64_t>(stall_train * 1000);
    o.stall_ms["rollout"] = static_cast<int64_t>(stall_rollout * 1000);
    o.probe_window_ms = static_cast<int64_t>(probe_window * 1000);
    o.process_gone = LocalProcessGone;
    o.age_ms = LocalHeartbeatAge;
    return o;
  }
};

void Print(const Detection& d, bool json, std::ostream& out) {
  if (json) {
    nlohmann::json j = DetectionFields(d);
    j["ts"] = WallSeconds();
    j["event"] = d.event;
    out << JsonText(j) << std::endl;
    return;
  }
  out << d.event << " " << d.key << " pid " << d.hb.pid << " phase " << d.hb.phase << " step " << d.hb.step
      << (d.reason.empty() ? "" : ": " + d.reason) << std::endl;
}

int RunMonitor(const std::string& endpoint, const DetectFlags& f, double duration_s, bool json, EventLog* events) {
  auto watcher = Watcher::Open(endpoint, f.Options(), events);
  if (!watcher.ok()) return Fail(kTool, watcher.status());
  spdlog::info("listening for heartbeats on {}", (*watcher)->endpoint());
  events->Emit("watch", {{"heartbeat", (*watcher)->endpoint()}});
  const std::atomic<bool>& stop = InstallStopSignals();
  int64_t until = duration_s > 0 ? MonoMillis() + static_cast<int64_t>(duration_s * 1000) : INT64_MAX;
  while (!stop.load() && MonoMillis() < until) {
    for (const Detection& d : (*watcher)->Pump(100)) {
      if (d.event != "probe") Print(d, json, std::cout);
    }
  }
  return kExitOk;
}

}  // namespace

int WatchdogMain(int argc, char** argv) {
  CommandLine cl(kTool, "rl-watchdog: role-aware failure detection and restarts (see man rl-watchdog)");
  std::string log_level = "info";
  cl.Bind(nullptr, "--log-level", &log_level);

  std::string heartbeat = "tcp://127.0.0.1:5560", run_dir, id = "0";
  DetectFlags df;
  double duration = 0;
  bool json = false;
  CLI::App* monitor = cl.Sub("monitor", "print every detection from the heartbeats of running roles");
  cl.Bind(monitor, "--heartbeat", &heartbeat);
  df.Bind(cl, monitor);
  cl.Bind(monitor, "--duration", &duration)->check(kNonNegative);
  cl.BindFlag(monitor, "--json", &json);
  cl.Bind(monitor, "--run-dir", &run_dir);
  cl.Bind(monitor, "--id", &id);

  std::string pipeline, restart;
  CLI::App* run = cl.Sub("run", "start the roles of PIPELINE.toml and restart the ones that fail");
  run->add_option("pipeline", pipeline, "pipeline file (see PIPELINE FILE in man rl-watchdog)")->required();
  CLI::Option* hb_opt = cl.Bind(run, "--heartbeat", &heartbeat);
  df.Bind(cl, run);
  cl.Require(cl.Bind(run, "--run-dir", &run_dir));
  cl.Bind(run, "--id", &id);
  CLI::Option* restart_opt = cl.Bind(run, "--restart", &restart)->check(CLI::IsMember({"role", "job"}));

  std::string stop_dir;
  CLI::App* stop = cl.Sub("stop", "stop the watchdog of RUN_DIR, then every role it started");
  stop->add_option("run_dir", stop_dir, "run directory of an rl-watchdog run")->required();

  StandInOptions si;
  HeartbeatFlags si_beat;
  CLI::App* beat = cl.Sub("beat", "a stand-in role: heartbeats in a fixed phase, its progress moving or not");
  cl.Require(cl.Bind(beat, "--role", &si.role));
  cl.Bind(beat, "--id", &si.id);
  cl.Bind(beat, "--phase", &si.phase);
  cl.Bind(beat, "--progress-every", &si.progress_every_s)->check(kNonNegative);
  cl.Bind(beat, "--step-every", &si.step_every_s)->check(kNonNegative);
  cl.Bind(beat, "--duration", &si.duration_s)->check(kNonNegative);
  cl.Bind(beat, "--stop-delay", &si.stop_delay_s)->check(kNonNegative);
  cl.Bind(beat, "--run-dir", &si.run_dir);
  si_beat.Bind(cl, beat);

  if (auto code = cl.Parse(argc, argv)) return *code;
  if (Status s = InitLogging(kTool, log_level); !s.ok()) return Fail(kTool, s);
  if (stop->parsed()) {
    auto n = StopPipeline(stop_dir, 10);
    if (!n.ok()) return Fail(kTool, n.status());
    spdlog::info("stopped {} role processes", *n);
    return kExitOk;
  }
  if (beat->parsed()) return RunStandIn(si, si_beat, InstallStopSignals());
  EventLog events;
  if (!run_dir.empty()) {
    if (Status s = events.Open(run_dir, "watchdog", id); !s.ok()) return Fail(kTool, s);
  }
  if (monitor->parsed()) return RunMonitor(heartbeat, df, duration, json, &events);
  auto spec = LoadPipeline(pipeline);
  if (!spec.ok()) return Fail(kTool, spec.status());
  SupervisorOptions so;
  so.pipeline = std::move(*spec);
  if (hb_opt->count() > 0 || std::getenv("RL_HEARTBEAT")) so.pipeline.heartbeat = heartbeat;
  if (restart_opt->count() > 0 || std::getenv("RL_WATCHDOG_RESTART")) so.pipeline.restart = restart;
  so.run_dir = run_dir;
  so.detector = df.Options();
  so.detector.process_gone = nullptr;  // the supervisor looks at its processes itself, with exit status
  const std::atomic<bool>& stop_flag = InstallStopSignals();
  auto code = RunSupervisor(std::move(so), &events, stop_flag);
  if (!code.ok()) return Fail(kTool, code.status());
  if (stop_flag.load()) std::cerr << "rl-watchdog: stopped; the roles keep running (rl-watchdog stop " << run_dir << " ends them)\n";
  return *code;
}

}  // namespace rl::health
