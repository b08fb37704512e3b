// Percentiles of latency samples, and the figure one measured operation yields.
// Thread safety: plain values and reentrant functions.
#pragma once

#include <cstdint>
#include <vector>

namespace rl::profile {

// The q-quantile (0 <= q <= 1) of `samples` by the nearest-rank method: the smallest sample with
// at least q of all samples at or below it. 0 for no samples. Sorts *samples.
double Percentile(std::vector<double>* samples, double q);

// The median of `values` (the mean of the middle two for an even count); 0 for none. Sorts.
double Median(std::vector<double>* values);

// What one operation of one system did in one phase.
struct OpFigure {
  uint64_t rows = 0;                // rows the operation carried
  double seconds = 0;               // wall time of the phase
  std::vector<double> latency_us;   // one sample per request (per row for end-to-end)

  double RowsPerSecond() const { return seconds > 0 ? rows / seconds : 0; }
  // Appends another thread's samples and rows; the phase's wall time is set by the caller.
  void Merge(const OpFigure& other);
};

}  // namespace rl::profile
