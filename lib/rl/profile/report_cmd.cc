#include "rl/profile/report_cmd.h"

#include <cstdio>
#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>

#include "rl/core/fail.h"
#include "rl/core/fs.h"
#include "rl/core/json_field.h"
#include "rl/core/printf.h"
#include "rl/profile/timeline_svg.h"

namespace rl::profile {
namespace {

struct ReportFlags {
  std::string run_dir, svg;
  bool json = false;
};

// A lane's layout switches (a rollout group's `layout` events): how many, how many widened, the
// seconds they took and what the predictor had said of them; and its stays (`layout_stay`: new
// prompts taken into merged replicas instead of a split).
struct LaneLayouts {
  std::string lane;
  int64_t switches = 0, wider = 0, stays = 0;
  double seconds = 0, predicted_s = 0;
};

std::vector<LaneLayouts> Layouts(const RunEvents& run) {
  std::vector<LaneLayouts> out;
  for (const auto& [lane, events] : run.lanes) {
    LaneLayouts l;
    l.lane = lane;
    for (const RunEvent& e : events) {
      if (e.event == "layout_stay") ++l.stays;
      if (e.event != "layout") continue;
      auto number = [&](const char* k) { return NumberField(e.fields, k, 0.0); };
      ++l.switches;
      l.wider += number("to") > number("from") ? 1 : 0;
      l.seconds += number("seconds");
      l.predicted_s += number("predicted_s");
    }
    if (l.switches > 0 || l.stays > 0) out.push_back(l);
  }
  return out;
}

double Phase(const StepTime& s, const char* name) {
  auto it = s.phases.find(name);
  return it == s.phases.end() ? 0 : it->second;
}

// One JSON line. Lane names are file names, which need not be UTF-8 (JsonText replaces them).
std::string JsonLine(const nlohmann::json& j) { return JsonText(j) + "\n"; }

void PrintJson(const EttrReport& r, const std::vector<LaneLayouts>& layouts, std::ostream& out) {
  double det = 0, res = 0, cat = 0;
  for (const FaultTime& f : r.faults) det += f.detection, res += f.restart, cat += f.catch_up;
  nlohmann::json summary = {{"type", "summary"}, {"ettr", r.ettr()}, {"productive_s", r.productive},
                            {"wall_s", r.wall()}, {"run_s", r.run_s}, {"steps", r.steps.size()},
                            {"redone", r.redone}, {"faults", r.faults.size()}, {"detection_s", det},
                            {"restart_s", res}, {"catch_up_s", cat}};
  if (r.trainer.empty()) summary["ettr"] = nullptr;  // no trainer: nothing to measure it by
  out << JsonLine(summary);
  for (const LaneLayouts& l : layouts) {
    nlohmann::json j = {{"type", "layouts"}, {"lane", l.lane}, {"switches", l.switches}, {"wider", l.wider},
                        {"narrower", l.switches - l.wider}, {"stays", l.stays}, {"seconds", l.seconds},
                        {"predicted_s", l.predicted_s}};
    out << JsonLine(j);
  }
  for (const FaultTime& f : r.faults) {
    nlohmann::json j = {{"type", "fault"}, {"member", f.member}, {"step", f.step}, {"action", f.action},
                        {"reason", f.reason}, {"fault_ts", f.fault_ts}, {"detection_s", f.detection},
                        {"restart_s", f.restart}, {"catch_up_s", f.catch_up}, {"lost_s", f.lost()},
                        {"ready", f.ready_ts.has_value()}};
    out << JsonLine(j);
  }
  for (const StepTime& s : r.steps) {
    nlohmann::json j = {{"type", "step"}, {"step", s.step}, {"seconds", s.seconds()}, {"phases", s.phases},
                        {"update", s.update}};
    out << JsonLine(j);
  }
}

void PrintLayouts(const std::vector<LaneLayouts>& layouts, std::ostream& out) {
  if (layouts.empty()) return;
  out << "\nlayouts lane          switches  wider  narrower  stays  seconds  predicted\n";
  for (const LaneLayouts& l : layouts) {
    out << Printf("        %-13s %8lld %6lld %9lld %6lld %8.3f %10.3f\n", l.lane.c_str(),
                  static_cast<long long>(l.switches), static_cast<long long>(l.wider),
                  static_cast<long long>(l.switches - l.wider), static_cast<long long>(l.stays), l.seconds,
                  l.predicted_s);
  }
}

}  // namespace

void PrintReport(const EttrReport& r, const RunEvents& run, const std::string& run_dir, bool json, std::ostream& out) {
  const std::vector<LaneLayouts> layouts = Layouts(run);
  if (json) return PrintJson(r, layouts, out);
  if (r.trainer.empty()) {  // a run without a trainer (a rollout measured alone): its lanes only
    out << Printf("run %s: %zu event log%s over %.1f s, no trainer: no ETTR\n", run_dir.c_str(), run.lanes.size(),
                  run.lanes.size() == 1 ? "" : "s", r.run_s);
    return PrintLayouts(layouts, out);
  }
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
  PrintLayouts(layouts, out);
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
            if (!report.ok() && report.status().code() != Code::kNotFound) return fail(report.status());
            if (!report.ok()) {  // no trainer, or one with no step: the timeline and layouts still
              spdlog::warn("{}", report.status().message());
              report = UntimedReport(*run);
            }
            if (!f->svg.empty()) {
              Status s = WriteFileAtomic(f->svg, TimelineSvg(*run, *report));
              if (!s.ok()) return fail(s);
            }
            PrintReport(*report, *run, f->run_dir, f->json, std::cout);
            return std::cout ? int{kExitOk} : int{kExitIOErr};
          }};
}

}  // namespace rl::profile
