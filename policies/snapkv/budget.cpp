// snapkv on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to snapkv's own knobs:
// budget_tokens = B (observation window included, as SnapKV counts it). Returns false when no configuration attends about that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/snapkv/params.hpp"
#include "policies/snapkv/policy.hpp"

namespace kvsim::policies::snapkv {

bool set_budget(ParamValues& v, int64_t /*prompt*/, int64_t budget) {
  Params p = param_table().read(v);
  p.budget_tokens = double(budget);  // the observation window included, as SnapKV counts it
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::snapkv
