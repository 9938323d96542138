#include "serve/step_costs.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/plan.hpp"

namespace kvsim::serve {

namespace {
constexpr int kExactBatches = 32;
constexpr double kBatchRatio = 1.0 + 1.0 / 16;
constexpr double kLengthRatio = 1.0 + 1.0 / 32;
constexpr double kLengthBase = 16;  // grid index 1; index 0 is 0 tokens

uint64_t key3(int a, int b, int c) { return (uint64_t(a) << 42) | (uint64_t(b) << 21) | uint64_t(c); }

// The grids' values, computed once: the cell lookups run several times per engine iteration, and
// pow/log there would cost more than the rest of the iteration.
std::vector<double> make_grid(Axis axis) {
  std::vector<double> g = {0};  // index 0: 0 tokens (batches start at index 1)
  if (axis == Axis::batch) {
    for (int i = 1; i <= kExactBatches; ++i) g.push_back(double(i));
    for (int i = kExactBatches + 1; g.back() < double(1 << 24); ++i)
      g.push_back(std::round(kExactBatches * std::pow(kBatchRatio, i - kExactBatches)));
  } else {
    for (int i = 1; g.back() < double(int64_t(1) << 34); ++i) g.push_back(kLengthBase * std::pow(kLengthRatio, i - 1));
  }
  return g;
}
const std::vector<double>& grid(Axis axis) {
  static const std::vector<double> batches = make_grid(Axis::batch), lengths = make_grid(Axis::prompt);
  return axis == Axis::batch ? batches : lengths;
}
}  // namespace

double grid_at(Axis axis, int i) { return grid(axis)[size_t(i)]; }

Cell cell_of(Axis axis, double x) {
  const std::vector<double>& g = grid(axis);
  const size_t first = axis == Axis::batch ? 1 : 0;
  x = std::clamp(x, g[first], g.back());
  const int lo = int(std::upper_bound(g.begin() + ptrdiff_t(first), g.end(), x) - g.begin()) - 1;
  if (g[size_t(lo)] == x) return {lo, lo, 0};
  return {lo, lo + 1, (x - g[size_t(lo)]) / (g[size_t(lo) + 1] - g[size_t(lo)])};
}

StepCosts::StepCosts(const Deployment& d, const Policy& pol, const ParamValues& params, int64_t max_prompt)
    : d_(d), pol_(pol), params_(params), max_prompt_(std::max<int64_t>(1, max_prompt)) {
  // Capacity: plan_memory's usable bytes less what does not scale with the batch, at the longest prompt
  // (the prefill workspace grows with it).
  DesignPoint one{&d, &pol, &params, max_prompt_, 1, 1}, two{&d, &pol, &params, max_prompt_, 1, 2};
  const MemoryReport a = plan_memory(one, nullptr), b = plan_memory(two, nullptr);
  hbm_cap_ = a.hbm_usable - (a.hbm_bytes - (b.hbm_bytes - a.hbm_bytes));
  dram_cap_ = a.dram_usable - (a.dram_bytes - (b.dram_bytes - a.dram_bytes));
}

double StepCosts::decode_exact(double batch, double prompt, double generated) const {
  return decode_step_time(d_, pol_, params_, StepShape{batch, prompt, generated});
}

double StepCosts::grid_decode(int ib, int ip, int ig) {
  const uint64_t k = key3(ib, ip, ig);
  auto it = decode_.find(k);
  if (it != decode_.end()) return it->second;
  ++decode_evals_;
  const double v = decode_exact(grid_at(Axis::batch, ib), grid_at(Axis::prompt, ip), grid_at(Axis::generated, ig));
  decode_.emplace(k, v);
  return v;
}

double StepCosts::decode(double batch, double prompt, double generated) {
  const Cell cb = cell_of(Axis::batch, batch), cp = cell_of(Axis::prompt, prompt),
             cg = cell_of(Axis::generated, generated);
  double t = 0;
  for (int i = 0; i < 2; ++i) {
    const double wb = i ? cb.w : 1 - cb.w;
    if (wb == 0) continue;
    for (int j = 0; j < 2; ++j) {
      const double wp = j ? cp.w : 1 - cp.w;
      if (wp == 0) continue;
      for (int k = 0; k < 2; ++k) {
        const double wg = k ? cg.w : 1 - cg.w;
        if (wg == 0) continue;
        t += wb * wp * wg * grid_decode(i ? cb.hi : cb.lo, j ? cp.hi : cp.lo, k ? cg.hi : cg.lo);
      }
    }
  }
  return t * decode_scale_;
}

double StepCosts::grid_prefill(int ix, bool policy) {
  const uint64_t k = (uint64_t(ix) << 1) | uint64_t(policy);
  auto it = prefill_.find(k);
  if (it != prefill_.end()) return it->second;
  const double x = grid_at(Axis::prompt, ix);
  const PrefillCost c = x > 0 ? prefill_cost(d_, pol_, params_, x) : PrefillCost{};
  prefill_.emplace((uint64_t(ix) << 1), c.dense_s);
  prefill_.emplace((uint64_t(ix) << 1) | 1, c.policy_s);
  return policy ? c.policy_s : c.dense_s;
}

double StepCosts::prefill_chunk(double from, double to) {
  auto D = [&](double x) {
    const Cell c = cell_of(Axis::prompt, x);
    const double a = grid_prefill(c.lo, false);
    return c.w == 0 ? a : a + c.w * (grid_prefill(c.hi, false) - a);
  };
  return std::max(0.0, D(to) - D(from)) * prefill_scale_;
}

double StepCosts::policy_prefill(double prompt) {
  const Cell c = cell_of(Axis::prompt, prompt);
  const double a = grid_prefill(c.lo, true);
  return (c.w == 0 ? a : a + c.w * (grid_prefill(c.hi, true) - a)) * prefill_scale_;
}

SeqMemory Footprint::at(int64_t generated, int64_t output) const {
  const double f =
      output > 1 ? double(std::clamp<int64_t>(generated - 1, 0, output - 1)) / double(output - 1) : 1.0;
  return {first.hbm + f * (last.hbm - first.hbm), first.dram + f * (last.dram - first.dram)};
}

const Footprint& StepCosts::footprint(int64_t prompt, int64_t output) {
  const uint64_t k = (uint64_t(prompt) << 32) | uint64_t(output);
  auto it = memory_.find(k);
  if (it != memory_.end()) return it->second;
  auto per_seq = [&](int64_t out) {
    DesignPoint one{&d_, &pol_, &params_, prompt, out, 1}, two{&d_, &pol_, &params_, prompt, out, 2};
    const MemoryReport a = plan_memory(one, nullptr), b = plan_memory(two, nullptr);
    return SeqMemory{b.hbm_bytes - a.hbm_bytes, b.dram_bytes - a.dram_bytes};
  };
  return memory_.emplace(k, Footprint{per_seq(1), per_seq(std::max<int64_t>(1, output))}).first->second;
}

}  // namespace kvsim::serve
