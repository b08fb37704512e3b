#include "rl/profile/ettr.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "rl/core/json_field.h"

namespace rl::profile {
namespace {

const std::vector<RunEvent>* TrainerLane(const RunEvents& run, std::string* name) {
  for (const auto& [lane, events] : run.lanes) {
    if (lane.rfind("train-", 0) == 0) {
      *name = lane;
      return &events;
    }
  }
  return nullptr;
}

// Every completed step with its interval; the kept ones are the last completion of each number.
void Steps(const std::vector<RunEvent>& lane, EttrReport* r, std::vector<double>* starts) {
  std::vector<StepTime> all;
  double boundary = std::nan("");
  for (const RunEvent& e : lane) {
    if (e.event == "start") {
      boundary = e.ts;
      starts->push_back(e.ts);
    } else if (e.event == "step" && !std::isnan(boundary)) {
      StepTime s{e.step, boundary, e.ts, {}, {}};
      for (const char* key : {"clip_fraction", "is_weight_mean", "is_weight_max", "is_capped_fraction"}) {
        if (e.fields.contains(key) && e.fields[key].is_number()) s.update[key] = e.fields[key].get<double>();
      }
      all.push_back(std::move(s));
      boundary = e.ts;
    }
  }
  std::map<int64_t, StepTime> kept;
  for (const StepTime& s : all) kept[s.step] = s;  // later completions replace earlier ones
  r->redone = static_cast<int64_t>(all.size() - kept.size());
  for (auto& [n, s] : kept) r->steps.push_back(s);
}

// Seconds the trainer spent in each phase within each kept step.
void Phases(const std::vector<RunEvent>& lane, EttrReport* r) {
  for (StepTime& s : r->steps) {
    for (size_t i = 0; i + 1 < lane.size(); ++i) {
      double a = std::max(s.start, lane[i].ts), b = std::min(s.end, lane[i + 1].ts);
      if (b > a) s.phases[lane[i].phase] += b - a;
    }
  }
}

const RunEvent* FirstAfter(const std::vector<RunEvent>& lane, double ts, const std::string& event,
                           const std::string& member = "") {
  for (const RunEvent& e : lane) {
    if (e.ts < ts || e.event != event) continue;
    if (!member.empty() && TextField(e.fields, "member") != member) continue;
    return &e;
  }
  return nullptr;
}

void Faults(const RunEvents& run, const std::vector<RunEvent>& trainer, const std::vector<double>& starts,
            EttrReport* r) {
  for (const auto& [lane, events] : run.lanes) {
    if (lane.rfind("watchdog-", 0) != 0) continue;
    for (const RunEvent& e : events) {
      if (e.event != "failure") continue;
      FaultTime f;
      f.member = TextField(e.fields, "member");
      f.kind = TextField(e.fields, "kind");
      f.reason = TextField(e.fields, "reason");
      f.step = IntField(e.fields, "pipeline_step", -1);
      f.detect_ts = e.ts;
      f.fault_ts = NumberField(e.fields, "fault_ts", e.ts);
      const RunEvent* d = FirstAfter(events, e.ts, "decision", f.member);
      f.action = d ? TextField(d->fields, "action") : "";
      bool trainer_down = f.kind == "train" || f.action == "restart-job";
      const RunEvent* ready = trainer_down ? FirstAfter(trainer, e.ts, "start") : FirstAfter(events, e.ts, "ready", f.member);
      if (ready && f.action != "give-up") f.ready_ts = ready->ts;
      f.detection = std::max(0.0, f.detect_ts - f.fault_ts);
      f.restart = f.ready_ts ? std::max(0.0, *f.ready_ts - f.detect_ts) : 0;
      if (trainer_down) {
        double last = -std::numeric_limits<double>::infinity();
        for (const StepTime& s : r->steps) {
          if (s.end <= f.fault_ts) last = std::max(last, s.end);
        }
        for (double t : starts) {
          if (t <= f.fault_ts) last = std::max(last, t);
        }
        f.catch_up = std::isfinite(last) ? f.fault_ts - last : 0;
      }
      r->faults.push_back(f);
    }
  }
  std::sort(r->faults.begin(), r->faults.end(), [](const FaultTime& a, const FaultTime& b) { return a.detect_ts < b.detect_ts; });
}

}  // namespace

Result<EttrReport> ComputeEttr(const RunEvents& run) {
  EttrReport r;
  const std::vector<RunEvent>* trainer = TrainerLane(run, &r.trainer);
  if (trainer == nullptr) return Status::NotFound("no trainer event log (events/train-*.jsonl)");
  std::vector<double> starts;
  Steps(*trainer, &r, &starts);
  if (starts.empty() || r.steps.empty()) return Status::NotFound(r.trainer + ".jsonl has no start and step events");
  Phases(*trainer, &r);
  r.t0 = starts.front();
  for (const StepTime& s : r.steps) {
    r.t1 = std::max(r.t1, s.end);
    r.productive += s.seconds();
  }
  r.run_s = UntimedReport(run).run_s;
  Faults(run, *trainer, starts, &r);
  return r;
}

EttrReport UntimedReport(const RunEvents& run) {
  EttrReport r;
  double first = std::numeric_limits<double>::infinity(), last = -first;
  for (const auto& [lane, events] : run.lanes) {
    if (events.empty()) continue;
    first = std::min(first, events.front().ts);
    last = std::max(last, events.back().ts);
  }
  if (last >= first) r.run_s = last - first;
  return r;
}

}  // namespace rl::profile
