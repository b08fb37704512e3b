// Placement: how rl-watchdog run moves slots between two roles (man/rl-watchdog.1, "PLACEMENT").
//
// A fixed pool of slots is split between roles A and B (say rollouts and a judge); x is the number
// A holds, 1 <= x <= P-1. The time per trainer step as a function of x is taken to be unimodal:
// too few generators starve the judge, too few judges hold the batch back. SplitSearch finds its
// minimum by ternary search on the integers: it asks for the time at two interior points of
// [lo, hi], keeps the two thirds that must hold the minimum, and once three or fewer points are
// left measures those and settles on the best split it measured. The supervisor walks x one slot
// at a time (a move drains one instance and starts one of the other role in its slot), so the
// search visits the nearer probe first.
//
// StepClock reads a trainer's step events (events/train-ID.jsonl: one "step" line per step with
// "seconds", the step's wall time), which time the steps to the millisecond, unlike heartbeats.
// Thread safety: values; one thread.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace rl::health {

class SplitSearch {
 public:
  // A search over x in [lo, hi] (lo >= 1, hi >= lo). sweep: measure every split instead, nearest
  // first (what a ternary search is checked against).
  SplitSearch(int lo, int hi, bool sweep = false);

  // The split to measure next, given that the pool stands at `at` now; nullopt when done.
  std::optional<int> Next(int at) const;
  // The time per step measured at x (the one Next asked for).
  void Record(int x, double seconds);
  bool done() const { return finished_; }
  // The best split measured (after done(): the result), and its time.
  int best() const;
  double best_seconds() const;
  const std::map<int, double>& measured() const { return measured_; }

 private:
  std::optional<int> Pending() const;  // an x of the current round not yet measured
  void Narrow();

  int lo_, hi_;
  bool sweep_;
  bool finished_ = false;
  std::map<int, double> measured_;
};

// The steps of a trainer, read from its event log as they are appended.
class StepClock {
 public:
  explicit StepClock(std::string path) : path_(std::move(path)) {}
  // Reads the lines appended since the last call; returns the step times ("seconds") of the new
  // step events, in order. A line cut short by a writer that died is read when it is whole.
  std::vector<double> Poll();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t offset_ = 0;
};

}  // namespace rl::health
