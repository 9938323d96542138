// ctkvr on the replay's one budget axis (replay/budget.hpp, docs/replay.md § Budgets): a
// budget B = "about B tokens attended per step, per layer and KV head" mapped to ctkvr's own knobs:
// init + local scaled to the paper's 5% of the context (§3.1.1), rho' = B - init - local, and rho =
// 2.5 rho' (§4.1.1) through per_centroid's default. Returns false when no configuration attends about
// that few tokens.
#include <algorithm>
#include <cmath>

#include "policies/ctkvr/params.hpp"
#include "policies/ctkvr/policy.hpp"

namespace kvsim::policies::ctkvr {

bool set_budget(ParamValues& v, int64_t prompt, int64_t budget) {
  Params p = param_table().read(v);
  // §3.1.1: init + local = 6,528 of 131,072 tokens (5%) on the GPU; the defaults split it 128 + 6,400.
  const double init = std::max(1.0, std::round(double(prompt) * 128.0 / 131072.0));
  const double local = std::max(1.0, std::round(double(prompt) * 6400.0 / 131072.0));
  const double rho_prime = double(budget) - init - local;
  if (rho_prime < 1) return false;
  p.init_tokens = init;
  p.local_tokens = local;
  p.budget_tokens = rho_prime;  // rho follows as 2.5 rho' (§4.1.1) unless per_centroid is set (centroid_ids)
  // C is left as it is (by default App. C.2's 1024; with centroids = 0 §4.1.1's min(2048, prompt/16):
  // centroid_count, params.hpp), so C does not move with B.
  v = param_table().values(p);
  return true;
}

}  // namespace kvsim::policies::ctkvr
