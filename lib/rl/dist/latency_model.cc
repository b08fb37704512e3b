#include "rl/dist/latency_model.h"

#include <algorithm>
#include <cmath>

namespace rl::dist {
namespace {

// Piecewise-linear interpolation through points sorted by x; linear extrapolation along the
// first or last segment; a constant for a single point. Never negative.
double Interpolate(const std::vector<std::pair<double, double>>& p, double x) {
  if (p.size() == 1) return p[0].second;
  size_t hi = 1;
  while (hi + 1 < p.size() && p[hi].first < x) ++hi;
  const auto& [x0, y0] = p[hi - 1];
  const auto& [x1, y1] = p[hi];
  const double y = x1 == x0 ? y1 : y0 + (y1 - y0) * (x - x0) / (x1 - x0);
  return std::max(y, 0.0);
}

}  // namespace

Result<LatencyModel> LatencyModel::Create(std::vector<DecodePoint> decode,
                                          std::vector<PrefillPoint> prefill, SwitchCosts costs) {
  LatencyModel m;
  for (const DecodePoint& d : decode) {
    if (d.tp < 1 || d.batch < 1 || d.context_tokens < 0 || !(d.seconds > 0)) {
      return Status::DataError("latency model: a decode point is not positive");
    }
    m.decode_[d.tp][d.batch].emplace_back(static_cast<double>(d.context_tokens), d.seconds);
  }
  for (const PrefillPoint& p : prefill) {
    if (p.tp < 1 || p.tokens < 1 || !(p.seconds > 0)) {
      return Status::DataError("latency model: a prefill point is not positive");
    }
    m.prefill_[p.tp].emplace_back(static_cast<double>(p.tokens), p.seconds);
  }
  if (m.decode_.empty()) return Status::DataError("latency model: no decode points");
  for (auto& [tp, by_batch] : m.decode_) {
    for (auto& [b, points] : by_batch) std::sort(points.begin(), points.end());
    if (m.prefill_.count(tp) == 0) {
      return Status::DataError("latency model: no prefill points for tp " + std::to_string(tp));
    }
  }
  for (auto& [tp, points] : m.prefill_) std::sort(points.begin(), points.end());
  if (costs.gather_bytes_per_s < 0 || costs.reshard_s < 0 || costs.kv_bytes_per_token < 0) {
    return Status::DataError("latency model: negative switch costs");
  }
  m.decode_points_ = std::move(decode);
  m.prefill_points_ = std::move(prefill);
  m.costs_ = costs;
  return m;
}

Result<LatencyModel> LatencyModel::FromJson(const nlohmann::json& j) {
  std::vector<DecodePoint> decode;
  std::vector<PrefillPoint> prefill;
  SwitchCosts costs;
  try {
    if (!j.is_object() || !j.contains("decode") || !j.contains("prefill") || !j.contains("switch")) {
      return Status::DataError("latency model: the profile needs decode, prefill and switch");
    }
    for (const auto& p : j.at("decode")) {
      if (!p.is_array() || p.size() != 4) return Status::DataError("latency model: a decode point is not [tp, B, T, s]");
      decode.push_back({p[0].get<int>(), p[1].get<int64_t>(), p[2].get<int64_t>(), p[3].get<double>()});
    }
    for (const auto& p : j.at("prefill")) {
      if (!p.is_array() || p.size() != 3) return Status::DataError("latency model: a prefill point is not [tp, tokens, s]");
      prefill.push_back({p[0].get<int>(), p[1].get<int64_t>(), p[2].get<double>()});
    }
    const auto& s = j.at("switch");
    costs.gather_bytes_per_s = s.at("gather_bytes_per_s").get<double>();
    costs.reshard_s = s.at("reshard_s").get<double>();
    costs.kv_bytes_per_token = s.at("kv_bytes_per_token").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return Status::DataError(std::string("latency model: ") + e.what());
  }
  return Create(std::move(decode), std::move(prefill), costs);
}

nlohmann::json LatencyModel::ToJson() const {
  nlohmann::json j;
  j["decode"] = nlohmann::json::array();
  for (const DecodePoint& d : decode_points_) j["decode"].push_back({d.tp, d.batch, d.context_tokens, d.seconds});
  j["prefill"] = nlohmann::json::array();
  for (const PrefillPoint& p : prefill_points_) j["prefill"].push_back({p.tp, p.tokens, p.seconds});
  j["switch"] = {{"gather_bytes_per_s", costs_.gather_bytes_per_s},
                 {"reshard_s", costs_.reshard_s},
                 {"kv_bytes_per_token", costs_.kv_bytes_per_token}};
  return j;
}

double LatencyModel::Step(int tp, int64_t batch, int64_t context_tokens) const {
  const auto& by_batch = decode_.at(tp);
  const double t = static_cast<double>(context_tokens);
  auto hi = by_batch.lower_bound(batch);
  if (hi != by_batch.end() && hi->first == batch) return Interpolate(hi->second, t);
  // Between the two nearest profiled batch sizes (or beyond the ends, along the nearest two).
  if (hi == by_batch.end()) --hi;
  if (hi == by_batch.begin()) {
    if (by_batch.size() == 1) return Interpolate(hi->second, t);
    ++hi;
  }
  auto lo = std::prev(hi);
  const double y0 = Interpolate(lo->second, t), y1 = Interpolate(hi->second, t);
  const double b0 = static_cast<double>(lo->first), b1 = static_cast<double>(hi->first);
  return std::max(0.0, y0 + (y1 - y0) * (static_cast<double>(batch) - b0) / (b1 - b0));
}

LatencyModel LatencyModel::Scaled(double factor) const {
  std::vector<DecodePoint> decode = decode_points_;
  for (DecodePoint& d : decode) d.seconds *= factor;
  std::vector<PrefillPoint> prefill = prefill_points_;
  for (PrefillPoint& p : prefill) p.seconds *= factor;
  return std::move(*Create(std::move(decode), std::move(prefill), costs_));  // positive stays positive
}

LatencyCalibration::LatencyCalibration(double half_life) : decay_(std::pow(0.5, 1.0 / std::max(half_life, 1.0))) {}

void LatencyCalibration::Observe(double profiled_s, double measured_s) {
  if (!(profiled_s > 0) || !(measured_s > 0) || !std::isfinite(profiled_s) || !std::isfinite(measured_s)) return;
  profiled_ = decay_ * profiled_ + profiled_s;
  measured_ = decay_ * measured_ + measured_s;
}

double LatencyModel::Prefill(int tp, int64_t tokens) const {
  return Interpolate(prefill_.at(tp), static_cast<double>(tokens));
}

double LatencyModel::Remaining(int tp, const std::vector<ReplicaLoad>& replicas) const {
  double slowest = 0;
  for (const ReplicaLoad& load : replicas) {
    int64_t horizon = 0;
    for (const auto& [len, budget] : load) horizon = std::max(horizon, budget);
    double total = 0;
    for (int64_t step = 0; step < horizon; ++step) {
      int64_t batch = 0, tokens = 0;
      for (const auto& [len, budget] : load) {
        if (budget <= step) continue;
        ++batch;
        tokens += len + step;
      }
      total += Step(tp, batch, tokens);
    }
    slowest = std::max(slowest, total);
  }
  return slowest;
}

std::vector<std::vector<int>> MergeInto(const std::vector<ReplicaLoad>& replicas, int count, int64_t capacity) {
  struct Seq {
    int64_t budget;
    size_t replica, index;
  };
  std::vector<Seq> order;
  std::vector<std::vector<int>> out(replicas.size());
  for (size_t r = 0; r < replicas.size(); ++r) {
    out[r].assign(replicas[r].size(), 0);
    for (size_t i = 0; i < replicas[r].size(); ++i) order.push_back({replicas[r][i].second, r, i});
  }
  std::stable_sort(order.begin(), order.end(), [](const Seq& a, const Seq& b) { return a.budget > b.budget; });
  std::vector<int64_t> work(static_cast<size_t>(count), 0), held(static_cast<size_t>(count), 0);
  for (const Seq& s : order) {
    size_t best = 0;
    bool found = false;
    for (size_t j = 0; j < work.size(); ++j) {
      if (held[j] >= capacity) continue;
      if (!found || work[j] < work[best]) best = j;
      found = true;
    }
    work[best] += s.budget;
    ++held[best];
    out[s.replica][s.index] = static_cast<int>(best);
  }
  return out;
}

SwitchEstimate LatencyModel::EstimateSwitch(int from, int to, const std::vector<ReplicaLoad>& replicas, int count,
                                            int64_t capacity) const {
  SwitchEstimate e;
  e.stay_s = Remaining(from, replicas);
  const std::vector<std::vector<int>> place = MergeInto(replicas, std::max(count, 1), capacity);
  std::vector<ReplicaLoad> merged(static_cast<size_t>(std::max(count, 1)));
  int64_t tokens = 0, sequences = 0;
  for (size_t r = 0; r < replicas.size(); ++r) {
    for (size_t i = 0; i < replicas[r].size(); ++i) {
      merged[static_cast<size_t>(place[r][i])].push_back(replicas[r][i]);
      tokens += replicas[r][i].first;
      ++sequences;
    }
  }
  e.after_s = Remaining(to, merged);
  if (sequences == 0) return e;
  // Every rank receives the other ranks' sequences' cache, padded to the longest (all-gather).
  const double bytes = static_cast<double>(tokens) * static_cast<double>(costs_.kv_bytes_per_token);
  e.migrate_s = costs_.reshard_s +
                (costs_.gather_bytes_per_s > 0 ? bytes / costs_.gather_bytes_per_s : 0);
  // Recomputing: each new replica prefills its sequences at their root-mean-square length; the
  // replicas do so at once, so the slowest counts.
  double slowest = 0;
  for (const ReplicaLoad& load : merged) {
    if (load.empty()) continue;
    double squares = 0;
    for (const auto& seq : load) squares += static_cast<double>(seq.first) * static_cast<double>(seq.first);
    const double rms = std::sqrt(squares / static_cast<double>(load.size()));
    const double prefill = Prefill(to, static_cast<int64_t>(std::lround(rms)));
    slowest = std::max(slowest, static_cast<double>(load.size()) * prefill);
  }
  e.recompute_s = costs_.reshard_s + slowest;
  e.recompute = e.recompute_s < e.migrate_s;
  return e;
}

}  // namespace rl::dist
