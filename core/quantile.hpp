// Quantiles of a sample, one rule for every summary kvsim prints (replay's quality columns, serving's
// latency percentiles): linear interpolation between the closest ranks (numpy's default, "type 7").
#pragma once
#include <cstddef>
#include <vector>

namespace kvsim {

// The q-quantile (0 <= q <= 1) of `sorted`, which is ascending and non-empty.
template <class T>
double interpolated_quantile(const std::vector<T>& sorted, double q) {
  const double x = q * double(sorted.size() - 1);
  const size_t i = size_t(x);
  const double f = x - double(i);
  return i + 1 < sorted.size() ? double(sorted[i]) * (1 - f) + double(sorted[i + 1]) * f : double(sorted[i]);
}

}  // namespace kvsim
