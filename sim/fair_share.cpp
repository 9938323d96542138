#include "sim/fair_share.hpp"

#include <algorithm>
#include <limits>

namespace kvsim::sim {

std::vector<double> max_min_fair(const std::vector<double>& cap, const std::vector<Flow>& flows) {
  std::vector<double> x;
  FairShareScratch scratch;
  std::vector<const double*> use;
  for (const Flow& f : flows) use.push_back(f.use.data());
  max_min_fair(cap, use.data(), use.size(), x, scratch);
  return x;
}

void max_min_fair(const std::vector<double>& cap, const double* const* use, size_t n, std::vector<double>& x,
                  FairShareScratch& scratch) {
  const size_t R = cap.size();
  x.assign(n, 0.0);
  std::vector<char>& frozen = scratch.frozen;
  frozen.assign(n, 0);
  std::vector<double>& left = scratch.left;  // capacity not yet taken by frozen flows and the common level
  left = cap;
  double level = 0;                // the common x of every unfrozen flow
  size_t active = n;
  constexpr double kRelTol = 1e-12;
  while (active > 0) {
    // The largest raise d of the common level before a resource saturates or a flow reaches 1.
    double d = 1.0 - level;
    std::vector<double>& demand = scratch.demand;  // d(use) / d(level) of the unfrozen flows, per resource
    demand.assign(R, 0.0);
    for (size_t i = 0; i < n; ++i)
      if (!frozen[i])
        for (size_t r = 0; r < R; ++r) demand[r] += use[i][r];
    for (size_t r = 0; r < R; ++r)
      if (demand[r] > 0) d = std::min(d, std::max(0.0, left[r]) / demand[r]);
    level += d;
    for (size_t r = 0; r < R; ++r) left[r] -= demand[r] * d;
    // Freeze flows at 1 and flows on saturated resources.
    for (size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      bool stop = level >= 1.0 - kRelTol;
      for (size_t r = 0; r < R && !stop; ++r)
        stop = use[i][r] > 0 && left[r] <= kRelTol * cap[r];
      if (stop) {
        frozen[i] = 1;
        x[i] = std::min(level, 1.0);
        --active;
      }
    }
  }
}

}  // namespace kvsim::sim
