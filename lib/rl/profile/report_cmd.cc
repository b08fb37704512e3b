#include "rl/profile/report_cmd.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include "rl/core/fail.h"
#include "rl/core/fs.h"
#include "rl/core/printf.h"
#include "rl/profile/timeline_svg.h"

namespace rl::profile {
namespace {

struct ReportFlags {
  std::string run_dir, svg;
  bool json = false;
};

double Phase(const StepTime& s, const char* name) {
  auto it = s.phases.find(name);
  return it == s.phases.end() ? 0 : it->second;
}

void PrintJson(const EttrReport& r, std::ostream& out) {
  double det = 0, res = 0, cat = 0;
  for (const FaultTime& f : r.faults) det += f.detection, res += f.restart, cat += f.catch_up;
  nlohmann::json summary = {{"type", "summary"}, {"ettr", r.ettr()}, {"productive_s", r.productive},
                            {"wall_s", r.wall()}, {"run_s", r.run_s}, {"steps", r.steps.size()},
                            {"redone", r.redone}, {"faults", r.faults.size()}, {"detection_s", det},
                            {"restart_s", res}, {"catch_up_s", cat}};
  out << summary.dump() << "\n";
  for (const FaultTime& f : r.faults) {
    nlohmann::json j = {{"type", "fault"}, {"member", f.member}, {"step", f.step}, {"action", f.action},
                        {"reason", f.reason}, {"fault_ts", f.fault_ts}, {"detection_s", f.detection},
                        {"restart_s", f.restart}, {"catch_up_s", f.catch_up}, {"lost_s", f.lost()},
                        {"ready", f.ready_ts.has_value()}};
    out << j.dump() << "\n";
  }
  for (const StepTime& s : r.steps) {
    nlohmann::json j = {{"type", "step"}, {"step", s.step}, {"seconds", s.seconds()}, {"phases", s.phases},
                        {"update", s.update}};
    out << j.dump() << "\n";
  }
}

}  // namespace

void PrintReport(const EttrReport& r, const std::string& run_dir, bool json, std::ostream& out) {
  if (json) return PrintJson(r, out);
  double det = 0, res = 0, cat = 0;
  for (const FaultTime& f : r.faults) det += f.detection, res += f.restart, cat += f.catch_up;
  out << Printf("run %s: trainer %s, %zu steps kept (%lld redone), %zu faults\n", run_dir.c_str(), r.trainer.c_str(),
                r.steps.size(), static_cast<long long>(r.redone), r.faults.size());
  out << Printf("ETTR %.3f = productive %.1f s / wall %.1f s (first trainer start to last step); run %.1f s\n",
                r.ettr(), r.productive, r.wall(), r.run_s);
  out << Printf("lost to faults: detection %.2f s, restart %.2f s, catch-up %.2f s (%.2f s)\n", det, res, cat,
                det + res + cat);
  if (!r.faults.empty()) {
    out << "\nfault member       step action        detect  restart catch-up     lost  reason\n";
    int n = 0;
    for (const FaultTime& f : r.faults) {
      out << Printf("%5d %-12s %4lld %-12s %7.2f %8.2f %8.2f %8.2f  %s%s\n", ++n, f.member.c_str(),
                    static_cast<long long>(f.step), f.action.c_str(), f.detection, f.restart, f.catch_up, f.lost(),
                    f.reason.c_str(), f.ready_ts ? "" : " (never ready)");
    }
  }
  // With an off-policy correction, each step's importance weights (mean, largest) and the share of
  // tokens their cap cut, beside the PPO clip's share.
  bool weights = false;
  for (const StepTime& s : r.steps) {
    weights = weights || (s.update.count("is_weight_mean") && s.update.at("is_weight_mean") > 0);
  }
  out << "\n step  seconds  waiting    train  checkpoint    other"
      << (weights ? "  clipped  w-mean   w-max   capped" : "") << "\n";
  for (const StepTime& s : r.steps) {
    double wait = Phase(s, "waiting-for-data"), train = Phase(s, "train"), ckpt = Phase(s, "checkpoint");
    out << Printf("%5lld %8.2f %8.2f %8.2f %11.2f %8.2f", static_cast<long long>(s.step), s.seconds(), wait, train,
                  ckpt, s.seconds() - wait - train - ckpt);
    if (weights) {
      auto get = [&](const char* k) { return s.update.count(k) ? s.update.at(k) : 0.0; };
      out << Printf("  %7.3f %7.3f %7.3f  %7.3f", get("clip_fraction"), get("is_weight_mean"), get("is_weight_max"),
                    get("is_capped_fraction"));
    }
    out << "\n";
  }
}

Subcommand AddReportCommand(CommandLine& cl) {
  auto f = std::make_shared<ReportFlags>();
  CLI::App* app = cl.Sub("report", "ETTR, time lost per fault, per-step breakdown and a timeline picture of a run");
  app->add_option("run_dir", f->run_dir, "run directory (its events/*.jsonl are read)")->required();
  cl.Bind(app, "--svg", &f->svg);
  cl.BindFlag(app, "--json", &f->json);
  return {app, [f] {
            auto fail = [](const Status& s) { return Fail("rl-profile", s); };
            auto run = LoadRunEvents(f->run_dir);
            if (!run.ok()) return fail(run.status());
            auto report = ComputeEttr(*run);
            if (!report.ok()) return fail(report.status());
            if (!f->svg.empty()) {
              Status s = WriteFileAtomic(f->svg, TimelineSvg(*run, *report));
              if (!s.ok()) return fail(s);
            }
            PrintReport(*report, f->run_dir, f->json, std::cout);
            return std::cout ? int{kExitOk} : int{kExitIOErr};
          }};
}

}  // namespace rl::profile
