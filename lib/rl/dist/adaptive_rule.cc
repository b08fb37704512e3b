#include "rl/dist/adaptive_rule.h"

#include <algorithm>

namespace rl::dist {

Decision Decide(const AdaptiveOptions& o, const LatencyModel* predictor, const std::vector<int>& degrees, int tp,
                int n, int this_check, const std::vector<ReplicaLoad>& replicas) {
  Decision d;
  std::vector<int> wider;
  for (int t : degrees) {
    if (t > tp && t % tp == 0) wider.push_back(t);
  }
  if (wider.empty()) return d;
  const int64_t slots = o.generate.slots;
  if (o.force_switch_check >= 0) {
    if (this_check < o.force_switch_check) return d;
    d.to = wider.front();
    if (predictor != nullptr && predictor->Has(tp) && predictor->Has(d.to)) {
      d.estimate = predictor->EstimateSwitch(tp, d.to, replicas, n / d.to, slots * d.to);
    }
    return d;
  }
  double best = 0;
  for (int t : wider) {
    if (!predictor->Has(t)) continue;  // a degree the profile lacks is no candidate
    const SwitchEstimate e = predictor->EstimateSwitch(tp, t, replicas, n / t, slots * t);
    if (d.to == 0 || e.total_s() < best) {
      d.to = t;
      d.estimate = e;
      best = e.total_s();
    }
  }
  if (d.to != 0 && !(best < d.estimate.stay_s * (1 - o.margin))) d.to = 0;
  return d;
}

// Where refilled prompts go: each to the replica holding the fewest sequences (ties: the lower
// index), from `held` per replica. Every rank deals alike.
std::vector<int> Deal(std::vector<int64_t> held, int64_t count) {
  std::vector<int> to;
  for (int64_t i = 0; i < count; ++i) {
    const auto least = std::min_element(held.begin(), held.end()) - held.begin();
    ++held[static_cast<size_t>(least)];
    to.push_back(static_cast<int>(least));
  }
  return to;
}

// What to do with new prompts while the stage is wider than start_tp: the degree to narrow to
// (tp: stay, the prompts dealt to the wide replicas) and the estimate it was taken on.
// Without a predictor that knows the degrees, narrow to start_tp: the tail that made the stage
// widen has ended. With one, each narrower degree it knows is predicted against staying: the time
// to finish the held sequences and the new prompts (`added`: length and token budget each, dealt
// as Deal will deal them; their prefill, then their whole budget), the narrowing's move of the
// held ones included. The best narrower degree is taken unless staying wins by the margin:
// narrowing is the rule's default, staying the exception the predictor must make.
Decision DecideNarrow(const AdaptiveOptions& o, const LatencyModel* predictor, const std::vector<int>& degrees, int tp,
                      int n, const std::vector<ReplicaLoad>& replicas, const ReplicaLoad& added) {
  Decision d;
  d.to = o.start_tp;
  if (predictor == nullptr || !predictor->Has(tp)) return d;
  const int64_t slots = o.generate.slots;
  // The time for replicas of degree t holding `loads` once the new prompts are dealt to them.
  auto finish = [&](std::vector<ReplicaLoad> loads, int t) {
    std::vector<int64_t> held;
    for (const ReplicaLoad& l : loads) held.push_back(static_cast<int64_t>(l.size()));
    const std::vector<int> dealt = Deal(held, static_cast<int64_t>(added.size()));
    std::vector<double> prefill(loads.size(), 0);
    for (size_t i = 0; i < added.size(); ++i) {
      const auto k = static_cast<size_t>(dealt[i]);
      loads[k].push_back(added[i]);
      prefill[k] += predictor->Prefill(t, added[i].first);
    }
    return predictor->Remaining(t, loads) + *std::max_element(prefill.begin(), prefill.end());
  };
  const double stay = finish(replicas, tp);
  bool found = false;
  double best = 0;
  for (int t : degrees) {
    if (t >= tp || tp % t != 0 || !predictor->Has(t)) continue;
    SwitchEstimate e = predictor->EstimateSwitch(tp, t, replicas, n / t, slots * t);
    const std::vector<std::vector<int>> place = MergeInto(replicas, n / t, slots * t);
    std::vector<ReplicaLoad> narrow(static_cast<size_t>(n / t));
    for (size_t r = 0; r < replicas.size(); ++r) {
      for (size_t i = 0; i < replicas[r].size(); ++i) narrow[static_cast<size_t>(place[r][i])].push_back(replicas[r][i]);
    }
    e.stay_s = stay;
    e.after_s = finish(std::move(narrow), t);
    if (!found || e.total_s() < best) {
      found = true;
      best = e.total_s();
      d.to = d.weighed = t;
      d.estimate = e;
    }
  }
  if (found && stay < best * (1 - o.margin)) d.to = tp;
  return d;
}

}  // namespace rl::dist
