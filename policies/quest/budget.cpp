// quest on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to quest's own knobs:
// budget_tokens = B (whole pages). Returns false when no configuration attends about that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/quest/params.hpp"
#include "policies/quest/policy.hpp"

namespace kvsim::policies::quest {

bool set_budget(ParamValues& v, int64_t /*prompt*/, int64_t budget) {
  Params p = param_table().read(v);
  p.budget_tokens = double(budget);  // whole pages: the selector and cost model round to pages
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::quest
