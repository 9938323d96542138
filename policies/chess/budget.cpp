// chess on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to chess's own knobs:
// rho_grid · rho_chunk · rho_page = (B - sink and window pages) / P, every ratio scaled by one factor found by bisection. Returns false when no configuration attends about that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/chess/params.hpp"
#include "policies/chess/policy.hpp"

namespace kvsim::policies::chess {

bool set_budget(ParamValues& v, int64_t prompt, int64_t budget) {
  Params p = param_table().read(v);
  const double fixed = (p.sink_pages + p.window_pages) * p.page_size;
  const double f = (double(budget) - fixed) / double(prompt);
  if (f <= 0) return false;
  // Table 1's tiers keep the ratios' proportions: every ratio is scaled by one factor s (clamped to 1).
  const Params defaults = param_table().read({});
  const double r0[3] = {defaults.rho_grid, defaults.rho_chunk, defaults.rho_page};
  // kept(s) = prod min(1, s r0_i) grows monotonically with s: bisect for the smallest s with kept(s) >= f.
  auto kept = [&](double s) { return std::min(1.0, s * r0[0]) * std::min(1.0, s * r0[1]) * std::min(1.0, s * r0[2]); };
  double lo = 0, hi = 1.0 / std::min({r0[0], r0[1], r0[2]});  // kept(hi) = 1
  if (f < 1)
    for (int it = 0; it < 100; ++it) {
      const double mid = 0.5 * (lo + hi);
      (kept(mid) < f ? lo : hi) = mid;
    }
  p.rho_grid = std::min(1.0, hi * r0[0]);
  p.rho_chunk = std::min(1.0, hi * r0[1]);
  p.rho_page = std::min(1.0, hi * r0[2]);
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::chess
