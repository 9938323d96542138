#include "sim/fair_share.hpp"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <limits>

namespace kvsim::sim {

std::vector<double> max_min_fair(const std::vector<double>& cap, const std::vector<Flow>& flows) {
  std::vector<uint8_t> res;
  std::vector<double> use;
  std::vector<size_t> start{0};
  for (const Flow& f : flows) {
    for (size_t r = 0; r < f.use.size(); ++r)
      if (f.use[r] != 0) res.push_back(uint8_t(r)), use.push_back(f.use[r]);
    start.push_back(res.size());
  }
  if (cap.size() > 64) throw std::invalid_argument("max_min_fair: at most 64 resources");
  uint64_t mask = 0;
  for (uint8_t r : res) mask |= uint64_t(1) << r;
  std::vector<SparseFlow> sparse;
  for (size_t i = 0; i < flows.size(); ++i)
    sparse.push_back({res.data() + start[i], use.data() + start[i], uint32_t(start[i + 1] - start[i])});
  std::vector<double> x;
  FairShareScratch scratch;
  max_min_fair(cap, sparse.data(), sparse.size(), mask, x, scratch);
  return x;
}

void max_min_fair(const std::vector<double>& cap, const SparseFlow* flows, size_t n, uint64_t resources,
                  std::vector<double>& x, FairShareScratch& scratch) {
  const size_t R = cap.size();
  constexpr double kRelTol = 1e-12;
  // Most events of a decode step have no flow or one (the others wait on launch latencies); for one
  // flow the filling below takes one round, done here without the working lists, with the same
  // arithmetic (a demand of 0 + use is use).
  if (n == 0) return x.clear();
  if (n == 1) {
    const SparseFlow& f = flows[0];
    double d = 1.0;
    for (uint32_t k = 0; k < f.count; ++k) {
      const double u = f.use[k], c = cap[f.resource[k]];
      if (u > 0 && u > c) d = std::min(d, std::max(0.0, c) / u);
    }
    bool stop = d >= 1.0 - kRelTol;
    for (uint32_t k = 0; k < f.count && !stop; ++k) {
      const double c = cap[f.resource[k]];
      stop = f.use[k] > 0 && c - f.use[k] * d <= kRelTol * c;
    }
    if (stop) return x.assign(1, std::min(d, 1.0));
    // Not frozen after one round (rounding): the general filling below, from the start.
  }
  x.assign(n, 0.0);
  std::vector<char>& frozen = scratch.frozen;
  frozen.assign(n, 0);
  // Only the resources some flow uses are visited: a resource no unfrozen flow uses has no demand,
  // bounds nothing and keeps its capacity, exactly as if it were visited.
  std::vector<uint32_t>& used = scratch.used;
  used.clear();
  std::vector<double>& left = scratch.left;  // capacity not yet taken by frozen flows and the common level
  std::vector<double>& demand = scratch.demand;  // d(use) / d(level) of the unfrozen flows, per resource
  for (uint64_t m = resources; m; m &= m - 1) used.push_back(uint32_t(std::countr_zero(m)));
  left.resize(R);
  demand.resize(R);
  for (uint32_t r : used) left[r] = cap[r];  // the others are never read
  double level = 0;  // the common x of every unfrozen flow
  size_t active = n;
  while (active > 0) {
    // The largest raise d of the common level before a resource saturates or a flow reaches 1.
    double d = 1.0 - level;
    for (uint32_t r : used) demand[r] = 0.0;
    for (size_t i = 0; i < n; ++i)
      if (!frozen[i])
        for (uint32_t k = 0; k < flows[i].count; ++k) demand[flows[i].resource[k]] += flows[i].use[k];
    // d <= 1 here, so a resource with no more demand than capacity left cannot bound it (its quotient
    // is >= 1 after rounding too): only the others divide.
    for (uint32_t r : used)
      if (demand[r] > 0 && demand[r] > left[r]) d = std::min(d, std::max(0.0, left[r]) / demand[r]);
    level += d;
    for (uint32_t r : used) left[r] -= demand[r] * d;
    // Freeze flows at 1 and flows on saturated resources.
    const bool all_at_one = level >= 1.0 - kRelTol;
    for (size_t i = 0; i < n; ++i) {
      if (frozen[i]) continue;
      bool stop = all_at_one;
      for (uint32_t k = 0; k < flows[i].count && !stop; ++k) {
        const size_t r = flows[i].resource[k];
        stop = flows[i].use[k] > 0 && left[r] <= kRelTol * cap[r];
      }
      if (stop) {
        frozen[i] = 1;
        x[i] = std::min(level, 1.0);
        --active;
      }
    }
  }
}

}  // namespace kvsim::sim
