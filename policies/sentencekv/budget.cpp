// sentencekv on the replay's one budget axis (traces/replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to sentencekv's own knobs:
// token_budget tau = B - sinks - recent (the always-resident tokens count against B). Returns false when no configuration attends about that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/sentencekv/params.hpp"
#include "policies/sentencekv/policy.hpp"

namespace kvsim::policies::sentencekv {

bool set_budget(ParamValues& v, int64_t /*prompt*/, int64_t budget) {
  Params p = param_table().read(v);
  const double tau = double(budget) - p.sinks - p.recent;  // the always-resident tokens count against B
  if (tau < 1) return false;
  p.token_budget = tau;
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::sentencekv
