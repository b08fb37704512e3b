// The figures rl-profile queue prints: one per (system, op, row size, fsync), with its ratios to
// the Redis and ZeroMQ baselines of the same op and row size, as a table or as JSON lines.
// Thread safety: plain values and reentrant functions.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "rl/profile/percentile.h"

namespace rl::profile {

constexpr char kSystemQueue[] = "rl-queue";
constexpr char kSystemRedis[] = "redis";
constexpr char kSystemZmq[] = "zmq";

struct Figure {
  std::string system;  // rl-queue, redis, zmq
  std::string op;      // put, get, ack, e2e
  size_t row_bytes = 0;
  size_t batch = 0;
  std::string fsync;   // rl-queue: its policy; redis: its appendfsync or "off"; zmq: "none"
  int producers = 0, consumers = 0;
  int runs = 0;
  uint64_t rows = 0;   // over every run
  double rows_per_s = 0, p50_us = 0, p99_us = 0;  // rows/s: the median run; percentiles: all runs' samples
  std::optional<bool> exactly_once;  // queues: every row consumed once
  // This figure over the same op and row size of the baseline, when there is one.
  // Redis is the one under the closest policy (RedisFsyncFor).
  std::optional<double> redis_rows_per_s, redis_p50, redis_p99, zmq_rows_per_s;
  // rl-queue: this figure's rows/s over rl-queue's under fsync never (same op and row size).
  std::optional<double> never_rows_per_s;
};

// Redis's persistence policy closest to an rl-queue fsync policy: always -> "always" (appendfsync
// always), batch -> "everysec", never (and anything else) -> "off" (no append-only file).
std::string RedisFsyncFor(const std::string& queue_fsync);

// A figure from the runs of one op; sorts their samples.
Figure MakeFigure(const std::string& system, const std::string& op, std::vector<OpFigure>* runs);

// Fills the ratio fields of every rl-queue figure from the redis, zmq and rl-queue never figures
// in `all`.
void AddRatios(std::vector<Figure>* all);

std::string FigureJson(const Figure& f);
void PrintTableHeader(std::ostream& out);
void PrintTableRow(const Figure& f, std::ostream& out);

}  // namespace rl::profile
