#include "rl/health/placement.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>

#include "rl/core/json_field.h"

namespace rl::health {

SplitSearch::SplitSearch(int lo, int hi, bool sweep)
    : lo_(std::max(1, lo)), hi_(std::max(std::max(1, lo), hi)), sweep_(sweep) {}

// The points of the current round: two interior probes while more than three points are left,
// then every point left.
std::optional<int> SplitSearch::Pending() const {
  if (finished_) return std::nullopt;
  if (hi_ - lo_ >= 3 && !sweep_) {
    int third = (hi_ - lo_) / 3;
    for (int x : {lo_ + third, hi_ - third}) {
      if (measured_.count(x) == 0) return x;
    }
    return std::nullopt;
  }
  for (int x = lo_; x <= hi_; ++x) {
    if (measured_.count(x) == 0) return x;
  }
  return std::nullopt;
}

std::optional<int> SplitSearch::Next(int at) const {
  if (finished_) return std::nullopt;
  // The nearer of the round's unmeasured points: the pool walks there one slot per move.
  std::optional<int> best;
  auto consider = [&](int x) {
    if (measured_.count(x) != 0) return;
    if (!best || std::abs(x - at) < std::abs(*best - at)) best = x;
  };
  if (hi_ - lo_ >= 3 && !sweep_) {
    int third = (hi_ - lo_) / 3;
    consider(lo_ + third);
    consider(hi_ - third);
  } else {
    for (int x = lo_; x <= hi_; ++x) consider(x);
  }
  return best;
}

void SplitSearch::Record(int x, double seconds) {
  measured_[x] = seconds;
  while (!finished_ && !Pending()) Narrow();
}

// Both probes of the round are measured: keep the part that must hold the minimum of a unimodal
// function. f(m1) < f(m2): the minimum is left of m2. f(m1) > f(m2): right of m1. Equal: between
// them (both sides of a plateau may hold it).
void SplitSearch::Narrow() {
  if (hi_ - lo_ < 3 || sweep_) {
    finished_ = true;
    return;
  }
  int third = (hi_ - lo_) / 3;
  int m1 = lo_ + third, m2 = hi_ - third;
  double f1 = measured_.at(m1), f2 = measured_.at(m2);
  if (f1 < f2) {
    hi_ = m2 - 1;
  } else if (f1 > f2) {
    lo_ = m1 + 1;
  } else {
    lo_ = m1;
    hi_ = m2;
  }
}

// The best of every split measured in this search, not only of the last round: with noisy
// measurements a probe of an earlier round may be the better one.
int SplitSearch::best() const {
  int x = lo_;
  double t = -1;
  for (const auto& [k, v] : measured_) {
    if (t < 0 || v < t) {
      x = k;
      t = v;
    }
  }
  return x;
}

double SplitSearch::best_seconds() const {
  auto it = measured_.find(best());
  return it == measured_.end() ? 0 : it->second;
}

std::vector<double> StepClock::Poll() {
  std::vector<double> steps;
  std::ifstream in(path_, std::ios::binary | std::ios::ate);
  if (!in) return steps;
  if (static_cast<uint64_t>(in.tellg()) < offset_) offset_ = 0;  // a new file in its place
  in.seekg(static_cast<std::streamoff>(offset_));
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no newline yet: the writer is not done with it
    offset_ += line.size() + 1;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || TextField(j, "event") != "step") continue;
    auto s = j.find("seconds");
    if (s != j.end() && s->is_number() && s->get<double>() >= 0) steps.push_back(s->get<double>());
  }
  return steps;
}

}  // namespace rl::health
