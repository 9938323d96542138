// sentencekv on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to sentencekv's own knobs:
// token_budget tau = B. Tau already counts the always-resident sinks and recent tokens (§4.1: tau is "the
// maximum number of tokens we can keep in GPU memory during decoding"; cost.cpp, selector.cpp), so the
// prompt tokens attended per step are tau. Returns false when no configuration attends about that few
// tokens: B leaves no token to retrieve beside the sinks and recent tokens.
#include <algorithm>
#include <cmath>

#include "policies/sentencekv/params.hpp"
#include "policies/sentencekv/policy.hpp"

namespace kvsim::policies::sentencekv {

bool set_budget(ParamValues& v, int64_t /*prompt*/, int64_t budget) {
  Params p = param_table().read(v);
  if (double(budget) - p.sinks - p.recent < 1) return false;  // nothing left to retrieve
  p.token_budget = double(budget);
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::sentencekv
