// sekv on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to sekv's own knobs:
// budget_ratio = B / P; the local window w is capped at B / 2. Returns false when no configuration attends about that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/sekv/params.hpp"
#include "policies/sekv/policy.hpp"

namespace kvsim::policies::sekv {

bool set_budget(ParamValues& v, int64_t prompt, int64_t budget) {
  Params p = param_table().read(v);
  // The paper's budget is a fraction of the prompt's KV; the local window is capped at B / 2 so that a
  // small budget is not spent on the window alone.
  p.budget_ratio = std::min(1.0, double(budget) / double(prompt));
  p.local_window = std::min(p.local_window, std::floor(double(budget) / 2));
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::sekv
