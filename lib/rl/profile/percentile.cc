#include "rl/profile/percentile.h"

#include <algorithm>
#include <cmath>

namespace rl::profile {

double Percentile(std::vector<double>* samples, double q) {
  if (samples->empty()) return 0;
  std::sort(samples->begin(), samples->end());
  q = std::clamp(q, 0.0, 1.0);
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(samples->size())));
  return (*samples)[rank == 0 ? 0 : rank - 1];
}

double Median(std::vector<double>* values) {
  if (values->empty()) return 0;
  std::sort(values->begin(), values->end());
  size_t n = values->size();
  return n % 2 ? (*values)[n / 2] : ((*values)[n / 2 - 1] + (*values)[n / 2]) / 2;
}

void OpFigure::Merge(const OpFigure& other) {
  rows += other.rows;
  latency_us.insert(latency_us.end(), other.latency_us.begin(), other.latency_us.end());
}

}  // namespace rl::profile
