// streaming on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to streaming's own knobs:
// sinks kept, window = B - sinks. Returns false when no configuration attends about that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/streaming/params.hpp"
#include "policies/streaming/policy.hpp"

namespace kvsim::policies::streaming {

bool set_budget(ParamValues& v, int64_t /*prompt*/, int64_t budget) {
  Params p = param_table().read(v);
  if (double(budget) <= p.sinks) return false;
  p.window = double(budget) - p.sinks;  // the sinks are kept, the window takes the rest
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::streaming
