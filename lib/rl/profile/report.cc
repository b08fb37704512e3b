#include "rl/profile/report.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace rl::profile {
namespace {

// The figure of `system` (under `fsync`, unless empty) for the same op and sizes as `like`.
const Figure* Find(const std::vector<Figure>& all, const std::string& system, const Figure& like,
                   const std::string& fsync = "") {
  for (const Figure& f : all) {
    if (f.system == system && f.op == like.op && f.row_bytes == like.row_bytes && f.batch == like.batch &&
        (fsync.empty() || f.fsync == fsync)) {
      return &f;
    }
  }
  return nullptr;
}

std::optional<double> Ratio(double a, double b) {
  if (b <= 0) return std::nullopt;
  return a / b;
}

nlohmann::ordered_json OrNull(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

std::string Cell(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", *v);
  return buf;
}

}  // namespace

std::string RedisFsyncFor(const std::string& queue_fsync) {
  if (queue_fsync == "always") return "always";
  if (queue_fsync == "batch") return "everysec";
  return "off";
}

Figure MakeFigure(const std::string& system, const std::string& op, std::vector<OpFigure>* runs) {
  Figure f;
  f.system = system;
  f.op = op;
  f.runs = static_cast<int>(runs->size());
  std::vector<double> rates, samples;
  for (const OpFigure& r : *runs) {
    f.rows += r.rows;
    rates.push_back(r.RowsPerSecond());
    samples.insert(samples.end(), r.latency_us.begin(), r.latency_us.end());
  }
  f.rows_per_s = Median(&rates);
  f.p50_us = Percentile(&samples, 0.50);
  f.p99_us = Percentile(&samples, 0.99);
  return f;
}

void AddRatios(std::vector<Figure>* all) {
  for (Figure& f : *all) {
    if (f.system != kSystemQueue) continue;
    if (const Figure* r = Find(*all, kSystemRedis, f, RedisFsyncFor(f.fsync))) {
      f.redis_rows_per_s = Ratio(f.rows_per_s, r->rows_per_s);
      f.redis_p50 = Ratio(f.p50_us, r->p50_us);
      f.redis_p99 = Ratio(f.p99_us, r->p99_us);
    }
    if (const Figure* z = Find(*all, kSystemZmq, f)) f.zmq_rows_per_s = Ratio(f.rows_per_s, z->rows_per_s);
    if (const Figure* n = Find(*all, kSystemQueue, f, "never")) f.never_rows_per_s = Ratio(f.rows_per_s, n->rows_per_s);
  }
}

std::string FigureJson(const Figure& f) {
  nlohmann::ordered_json j = {
      {"system", f.system},
      {"op", f.op},
      {"row_bytes", f.row_bytes},
      {"batch", f.batch},
      {"fsync", f.fsync},
      {"producers", f.producers},
      {"consumers", f.consumers},
      {"runs", f.runs},
      {"rows", f.rows},
      {"rows_per_s", f.rows_per_s},
      {"p50_us", f.p50_us},
      {"p99_us", f.p99_us},
      {"exactly_once", f.exactly_once ? nlohmann::ordered_json(*f.exactly_once) : nlohmann::ordered_json(nullptr)},
      {"rows_per_s_vs_redis", OrNull(f.redis_rows_per_s)},
      {"p50_vs_redis", OrNull(f.redis_p50)},
      {"p99_vs_redis", OrNull(f.redis_p99)},
      {"rows_per_s_vs_zmq", OrNull(f.zmq_rows_per_s)},
      {"rows_per_s_vs_never", OrNull(f.never_rows_per_s)},
  };
  return j.dump();
}

void PrintTableHeader(std::ostream& out) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-9s %-13s %9s %5s %-8s %3s %3s %4s %8s %11s %10s %10s %6s %7s %7s %7s %7s %7s\n",
                "system", "op", "row_bytes", "batch", "fsync", "P", "C", "runs", "rows", "rows/s", "p50_us", "p99_us",
                "once", "x_redis", "p50_xr", "p99_xr", "x_zmq", "x_never");
  out << buf;
}

void PrintTableRow(const Figure& f, std::ostream& out) {
  char buf[320];
  const char* once = !f.exactly_once ? "-" : (*f.exactly_once ? "yes" : "NO");
  std::snprintf(buf, sizeof(buf),
                "%-9s %-13s %9zu %5zu %-8s %3d %3d %4d %8llu %11.0f %10.1f %10.1f %6s %7s %7s %7s %7s %7s\n",
                f.system.c_str(), f.op.c_str(), f.row_bytes, f.batch, f.fsync.c_str(), f.producers, f.consumers, f.runs,
                static_cast<unsigned long long>(f.rows), f.rows_per_s, f.p50_us, f.p99_us, once,
                Cell(f.redis_rows_per_s).c_str(), Cell(f.redis_p50).c_str(), Cell(f.redis_p99).c_str(),
                Cell(f.zmq_rows_per_s).c_str(), Cell(f.never_rows_per_s).c_str());
  out << buf;
}

}  // namespace rl::profile
