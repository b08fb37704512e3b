// LatencyModel: PAT's predictor of decoding time, built from an offline profile (rl-profile
// decode-grid): per-step decode latency as a function of the batch size B, the total context
// tokens T of the batch and the tensor-parallel degree, plus the one-time cost of switching
// degrees.
//
// Step(tp, B, T): for each profiled batch size, latency is piecewise linear in T between the
// profiled context points (extrapolated along the last segment); between profiled batch sizes it
// is interpolated linearly from the two nearest ones. Remaining(tp, replicas) adds the steps a set
// of replicas still has to take, each sequence bounded by its remaining token budget (the longest
// it may still run): the stage ends when the slowest replica does.
// Switch costs: moving the KV cache (bytes over the measured all-gather bandwidth) or recomputing
// it (a prefill of every sequence at the root-mean-square length, as PAT estimates it), whichever
// is cheaper, plus resharding the weights (measured).
// The profile is JSON (see ToJson). Thread safety: immutable after construction.
// LatencyCalibration follows the machine as it drifts from the moment of the profile (other load
// on shared cores, clocks): the ratio of measured to profiled decode time over recent rounds, by
// which Scaled() stretches the profile's compute times.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "rl/core/status.h"

namespace rl::dist {

struct DecodePoint {
  int tp = 1;
  int64_t batch = 1;
  int64_t context_tokens = 0;  // T: the sum of the batch's sequence lengths
  double seconds = 0;          // one decode step
};

struct PrefillPoint {
  int tp = 1;
  int64_t tokens = 0;  // one sequence's prompt
  double seconds = 0;
};

// What a switch costs beyond the state: measured once per profile.
struct SwitchCosts {
  double gather_bytes_per_s = 0;    // all-gather bandwidth of the group, per receiving rank
  double reshard_s = 0;             // slicing a rank's weights into its shard
  int64_t kv_bytes_per_token = 0;   // 2 * layers * kv_heads * head_dim * element size (whole)
};

// A replica's unfinished sequences: (current length, remaining token budget) each.
using ReplicaLoad = std::vector<std::pair<int64_t, int64_t>>;

struct SwitchEstimate {
  double stay_s = 0;       // remaining time without switching
  double after_s = 0;      // remaining time after switching, switch excluded
  double migrate_s = 0;    // moving the KV cache (and resharding)
  double recompute_s = 0;  // recomputing it (and resharding)
  bool recompute = false;  // the cheaper way
  double total_s() const { return after_s + (recompute ? recompute_s : migrate_s); }
};

// Where the unfinished sequences of `replicas` go when they merge into `count` wider replicas of
// at most `capacity` sequences each: out[r][i] is the new replica of replicas[r][i]. Balanced by
// remaining work: the longest remaining budgets first, each to the new replica with the least
// budget so far (ties: the lower index); sequences keep their order within a new replica. Integer
// arithmetic only, so every rank that holds the same loads places them alike. REQUIRES: count >= 1
// and count * capacity >= the number of sequences.
std::vector<std::vector<int>> MergeInto(const std::vector<ReplicaLoad>& replicas, int count, int64_t capacity);

class LatencyModel {
 public:
  // DataError when a degree has no decode points, or a point is not positive.
  static Result<LatencyModel> Create(std::vector<DecodePoint> decode,
                                     std::vector<PrefillPoint> prefill, SwitchCosts costs);
  // The profile file's JSON: {"decode": [[tp, B, T, s], ...], "prefill": [[tp, tokens, s], ...],
  // "switch": {"gather_bytes_per_s", "reshard_s", "kv_bytes_per_token"}}. DataError when
  // malformed.
  static Result<LatencyModel> FromJson(const nlohmann::json& j);
  nlohmann::json ToJson() const;

  bool Has(int tp) const { return decode_.count(tp) > 0; }
  double Step(int tp, int64_t batch, int64_t context_tokens) const;
  double Prefill(int tp, int64_t tokens) const;
  // The time until every replica has finished (each at degree tp).
  double Remaining(int tp, const std::vector<ReplicaLoad>& replicas) const;
  // Staying at `from` with these replicas against merging them into `count` replicas at `to`
  // as MergeInto places them (count 1: all into one).
  SwitchEstimate EstimateSwitch(int from, int to, const std::vector<ReplicaLoad>& replicas, int count = 1,
                                int64_t capacity = std::numeric_limits<int64_t>::max()) const;
  // This model with every decode and prefill time multiplied by `factor` (the switch's measured
  // bandwidth and resharding time as they are). REQUIRES: factor > 0 and finite.
  LatencyModel Scaled(double factor) const;

 private:
  // decode_[tp][batch] = (T, seconds) points sorted by T.
  std::map<int, std::map<int64_t, std::vector<std::pair<double, double>>>> decode_;
  std::map<int, std::vector<std::pair<double, double>>> prefill_;  // tp -> (tokens, s) sorted
  std::vector<DecodePoint> decode_points_;
  std::vector<PrefillPoint> prefill_points_;
  SwitchCosts costs_;
};

// The ratio of measured to predicted decode time over the recent rounds: sums of both decayed by
// half every `half_life` observations, so that a slow spell of the machine is followed within a
// few dozen rounds and one outlier moves it little. scale() is 1 until the first observation.
// Thread safety: none.
class LatencyCalibration {
 public:
  explicit LatencyCalibration(double half_life = 32);
  // One round: what the uncalibrated profile predicted and what it took. Rounds with a
  // non-positive or non-finite time are ignored.
  void Observe(double profiled_s, double measured_s);
  double scale() const { return profiled_ > 0 ? measured_ / profiled_ : 1.0; }

 private:
  double decay_;
  double profiled_ = 0, measured_ = 0;
};

}  // namespace rl::dist
