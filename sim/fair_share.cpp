#include "sim/fair_share.hpp"

#include <algorithm>
#include <limits>

namespace kvsim::sim {

std::vector<double> max_min_fair(const std::vector<double>& cap, const std::vector<Flow>& flows) {
  const size_t n = flows.size(), R = cap.size();
  std::vector<double> x(n, 0.0);
  std::vector<bool> frozen(n, false);
  std::vector<double> left = cap;  // capacity not yet taken by frozen flows and the common level
  double level = 0;                // the common x of every unfrozen flow
  size_t active = n;
  constexpr double kRelTol = 1e-12;
  while (active > 0) {
    // The largest raise d of the common level before a resource saturates or a flow reaches 1.
    double d = 1.0 - level;
    std::vector<double> demand(R, 0.0);  // d(use) / d(level) of the unfrozen flows, per resource
    for (size_t i = 0; i < n; ++i)
      if (!frozen[i])
        for (size_t r = 0; r < R; ++r) demand[r] += flows[i].use[r];
    for (size_t r = 0; r < R; ++r)
      if (demand[r] > 0) d = std::min(d, std::max(0.0, left[r]) / demand[r]);
    level += d;
    for (size_t r = 0; r < R; ++r) left[r] -= demand[r] * d;
    // Freeze flows at 1 and flows on saturated resources.
    for (size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      bool stop = level >= 1.0 - kRelTol;
      for (size_t r = 0; r < R && !stop; ++r)
        stop = flows[i].use[r] > 0 && left[r] <= kRelTol * cap[r];
      if (stop) {
        frozen[i] = true;
        x[i] = std::min(level, 1.0);
        --active;
      }
    }
  }
  return x;
}

}  // namespace kvsim::sim
