#include "serve/step_range.hpp"

#include <algorithm>
#include <cmath>

#include "core/quantile.hpp"
#include "model/plan.hpp"

namespace kvsim::serve {

StepRange step_range(const Deployment& d, const PolicyChoice& pc, const std::vector<Request>& requests) {
  StepRange s;
  if (requests.empty()) return s;
  std::vector<double> prompts, outputs;
  for (const Request& r : requests) prompts.push_back(double(r.prompt_tokens)), outputs.push_back(double(r.output_tokens));
  std::sort(prompts.begin(), prompts.end());
  std::sort(outputs.begin(), outputs.end());
  const int64_t ctx = std::max<int64_t>(1, std::llround(interpolated_quantile(prompts, 0.5)));
  const int64_t out = std::max<int64_t>(1, std::llround(interpolated_quantile(outputs, 0.5)));
  const PlanResult pr = evaluate(DesignPoint{&d, pc.policy, &pc.params, ctx, out, 0});
  if (!pr.feasible || !(pr.tpot_s > 0) || !(pr.ttft_s > 0)) return s;
  s.known = true;
  s.decode_low = pr.tpot_lo_s / pr.tpot_s, s.decode_high = pr.tpot_hi_s / pr.tpot_s;
  s.prefill_low = pr.ttft_lo_s / pr.ttft_s, s.prefill_high = pr.ttft_hi_s / pr.ttft_s;
  return s;
}

}  // namespace kvsim::serve
