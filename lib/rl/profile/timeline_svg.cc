#include "rl/profile/timeline_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "rl/core/json_field.h"

namespace rl::profile {
namespace {

constexpr double kWidth = 1200, kLeft = 110, kRight = 20, kTop = 30, kLane = 26, kBar = 16;
constexpr char kLayoutColour[] = "#d81b60";

const char* Colour(const std::string& phase) {
  if (phase == "train") return "#2e7d32";
  if (phase == "generate") return "#1565c0";
  if (phase == "score") return "#6a1b9a";
  if (phase == "write") return "#4fc3f7";
  if (phase == "checkpoint") return "#f9a825";
  if (phase == "loading-weights") return "#ff8f00";
  if (phase.rfind("waiting", 0) == 0) return "#cfd8dc";
  if (phase == "stopped") return "";
  return "#90a4ae";  // start, serve, others
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '"') out += "&quot;";
    else out += c;
  }
  return out;
}

// "train-0" -> "train/0", the member name the watchdog uses.
std::string MemberOf(const std::string& lane) {
  size_t dash = lane.rfind('-');
  return dash == std::string::npos ? lane : lane.substr(0, dash) + "/" + lane.substr(dash + 1);
}

class Picture {
 public:
  Picture(double t0, double t1) : t0_(t0), t1_(std::max(t1, t0 + 1e-3)) {}
  double X(double ts) const { return kLeft + (ts - t0_) / (t1_ - t0_) * (kWidth - kLeft - kRight); }
  std::ostringstream& out() { return out_; }
  void Rect(double a, double b, double y, double h, const char* fill, const std::string& title, double opacity = 1) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\" opacity=\"%.2f\">",
                  X(a), y, std::max(0.5, X(b) - X(a)), h, fill, opacity);
    out_ << buf << "<title>" << Escape(title) << "</title></rect>\n";
  }
  void Line(double ts, double y0, double y1, const char* colour, double width) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"/>\n",
                  X(ts), y0, X(ts), y1, colour, width);
    out_ << buf;
  }
  // A hollow ring centred at pixel x (a decision that changed nothing: a layout stay).
  void Ring(double x, double y, const char* colour, const std::string& title) {
    char buf[200];
    std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\">",
                  x, y, colour);
    out_ << buf << "<title>" << Escape(title) << "</title></circle>\n";
  }
  void Text(double x, double y, const std::string& s, const char* anchor = "start", int size = 12) {
    char buf[120];
    std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%d\" text-anchor=\"%s\">", x, y, size, anchor);
    out_ << buf << Escape(s) << "</text>\n";
  }

 private:
  double t0_, t1_;
  std::ostringstream out_;
};

// A rollout group's switch of tensor-parallel degree (its `layout` event): a tick where it began
// (`at`; the event's ts is its batch's end) and a band as long as it took.
void LayoutSwitch(Picture* p, const std::string& lane, const RunEvent& e, double y) {
  const nlohmann::json& f = e.fields;
  if (!f.contains("at") || !f["at"].is_number()) return;  // logs written before switches had a time
  auto number = [&](const char* key) { return f.contains(key) && f[key].is_number() ? f[key].get<double>() : 0.0; };
  const double at = number("at"), seconds = std::max(0.0, number("seconds"));
  char what[200];
  std::snprintf(what, sizeof what, "%s: tp %.0f to %.0f after round %.0f, %.0f sequences %s, %.3f s (predicted %.3f s)",
                lane.c_str(), number("from"), number("to"), number("round"), number("sequences"),
                BoolField(f, "recompute", false) ? "recomputed" : "moved", seconds, number("predicted_s"));
  p->Rect(at, at + seconds, y - 2, kBar + 4, kLayoutColour, what, 0.5);
  p->Line(at, y - 2, y + kBar + 2, kLayoutColour, 1.5);
}

// A rollout group's `layout_stay` event: a ring above its lane's bar at the decision.
void LayoutStay(Picture* p, const std::string& lane, const RunEvent& e, double y) {
  const nlohmann::json& f = e.fields;
  if (!f.contains("at") || !f["at"].is_number()) return;
  auto number = [&](const char* key) { return f.contains(key) && f[key].is_number() ? f[key].get<double>() : 0.0; };
  char what[300];
  std::snprintf(what, sizeof what, "%s: stayed at tp %.0f after round %.0f for %.0f new prompts beside %.0f sequences "
                "(staying %.3f s, tp %.0f %.3f s predicted)", lane.c_str(), number("tp"), number("round"),
                number("added"), number("sequences"), number("stay_s"), number("to"), number("predicted_s"));
  p->Ring(p->X(number("at")), y - 5, kLayoutColour, what);
}

void Lane(Picture* p, const std::string& name, const std::vector<RunEvent>& events, const EttrReport& r, double y) {
  std::string member = MemberOf(name);
  p->Text(kLeft - 8, y + kBar - 3, name, "end");
  // One bar per run of lines in the same phase (lines are many: a rollout writes one per batch).
  double from = 0;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    double a = events[i].ts, b = events[i + 1].ts;
    bool cut = false;
    for (const FaultTime& f : r.faults) {  // a killed process's last phase ends at its fault
      if ((f.member == member || f.action == "restart-job") && f.fault_ts >= a && f.fault_ts < b) b = f.fault_ts, cut = true;
    }
    if (i == 0 || events[i].phase != events[i - 1].phase) from = a;
    bool last = cut || events[i + 1].phase != events[i].phase || i + 2 == events.size();
    const char* fill = Colour(events[i].phase);
    if (last && *fill && b > from) p->Rect(from, b, y, kBar, fill, name + ": " + events[i].phase);
    if (cut) from = events[i + 1].ts;
  }
  if (name == r.trainer) {
    for (const StepTime& s : r.steps) p->Line(s.end, y - 2, y + kBar + 2, "#1b5e20", 1);
  }
  for (const RunEvent& e : events) {
    if (e.event == "layout") LayoutSwitch(p, name, e, y);
    if (e.event == "layout_stay") LayoutStay(p, name, e, y);
  }
  for (const FaultTime& f : r.faults) {
    if (f.member != member && f.action != "restart-job") continue;
    double until = f.ready_ts ? *f.ready_ts : f.detect_ts;
    p->Rect(f.fault_ts, until, y - 3, kBar + 6, "#e53935", f.member + ": " + f.reason + " (" + f.action + ")", 0.3);
    p->Line(f.fault_ts, y - 4, y + kBar + 4, "#c62828", 2);
  }
}

}  // namespace

std::string TimelineSvg(const RunEvents& run, const EttrReport& report) {
  double t0 = std::numeric_limits<double>::infinity(), t1 = -t0;
  std::vector<std::string> lanes;
  for (const auto& [name, events] : run.lanes) {
    if (name.rfind("watchdog-", 0) == 0 || events.empty()) continue;
    lanes.push_back(name);
    t0 = std::min(t0, events.front().ts);
    t1 = std::max(t1, events.back().ts);
  }
  if (lanes.empty()) t0 = t1 = 0;  // the watchdog's log alone
  Picture p(t0, t1);
  double height = kTop + kLane * lanes.size() + 68;
  p.out() << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << height
          << "\" font-family=\"sans-serif\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  char title[160];
  if (report.trainer.empty()) {  // a run without a trainer (UntimedReport)
    std::snprintf(title, sizeof title, "%zu role instance%s over %.1f s, no trainer (no ETTR)", lanes.size(),
                  lanes.size() == 1 ? "" : "s", report.run_s);
  } else {
    std::snprintf(title, sizeof title, "ETTR %.3f over %.1f s, %zu steps, %zu faults", report.ettr(), report.wall(),
                  report.steps.size(), report.faults.size());
  }
  p.Text(kLeft, 18, title, "start", 14);
  for (size_t i = 0; i < lanes.size(); ++i) Lane(&p, lanes[i], run.lanes.at(lanes[i]), report, kTop + i * kLane);
  double axis = kTop + kLane * lanes.size() + 4;
  double span = t1 - t0, tick = std::pow(10, std::floor(std::log10(std::max(span, 1e-3) / 5)));
  // By count, not by t += tick: a span of times near the double range overflows to inf, and a
  // loop to inf would never end. A finite span needs 5 to 50 ticks; 60 only bounds the loop.
  for (int i = 0; std::isfinite(tick) && i <= 60 && i * tick <= span; ++i) {
    const double t = i * tick;
    p.Line(t0 + t, axis, axis + 4, "#444", 1);
    char label[32];
    std::snprintf(label, sizeof label, "%g s", t);
    p.Text(p.X(t0 + t), axis + 16, label, "middle", 10);
  }
  double x = kLeft, y = axis + 36;
  for (const char* phase : {"train", "generate", "score", "write", "checkpoint", "loading-weights", "waiting", "start"}) {
    p.out() << "<rect x=\"" << x << "\" y=\"" << y - 10 << "\" width=\"12\" height=\"12\" fill=\"" << Colour(phase) << "\"/>\n";
    p.Text(x + 16, y, phase);
    x += 20 + 8 * std::string(phase).size() + 12;
  }
  p.out() << "<line x1=\"" << x << "\" y1=\"" << y - 10 << "\" x2=\"" << x << "\" y2=\"" << y + 2
          << "\" stroke=\"#c62828\" stroke-width=\"2\"/>\n";
  p.Text(x + 6, y, "fault (shaded until ready)");
  x = kLeft, y += 18;  // a second row: the first is full
  p.out() << "<line x1=\"" << x << "\" y1=\"" << y - 10 << "\" x2=\"" << x << "\" y2=\"" << y + 2
          << "\" stroke=\"" << kLayoutColour << "\" stroke-width=\"1.5\"/>\n";
  const std::string switch_label = "layout switch (tp)";
  p.Text(x + 6, y, switch_label);
  x += 6 + 8 * switch_label.size() + 16;  // 8 px a character, as the first row counts
  p.Ring(x, y - 4, kLayoutColour, "a layout stay");
  p.Text(x + 8, y, "layout stay (new prompts taken wide)");
  p.out() << "</svg>\n";
  return p.out().str();
}

}  // namespace rl::profile
