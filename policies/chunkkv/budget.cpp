// chunkkv on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to chunkkv's own knobs:
// budget_tokens = B (L_max, window included). Returns false when no configuration attends about that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/chunkkv/params.hpp"
#include "policies/chunkkv/policy.hpp"

namespace kvsim::policies::chunkkv {

bool set_budget(ParamValues& v, int64_t /*prompt*/, int64_t budget) {
  Params p = param_table().read(v);
  p.budget_tokens = double(budget);  // L_max, the observation window included (§3.2)
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::chunkkv
