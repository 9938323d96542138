#include "serve/step_range.hpp"

#include <algorithm>

#include "model/plan.hpp"
#include "serve/step_costs.hpp"

namespace kvsim::serve {

StepRange step_range(const Deployment& d, const PolicyChoice& pc, const std::vector<Request>& requests) {
  StepRange s;
  if (requests.empty()) return s;
  const MedianRequest m = median_request(requests);
  const PlanResult pr = evaluate(DesignPoint{&d, pc.policy, &pc.params, std::max<int64_t>(1, m.prompt), m.output, 0});
  if (!pr.feasible || !(pr.tpot_s > 0) || !(pr.ttft_s > 0)) return s;
  s.known = true;
  s.decode_low = pr.tpot_lo_s / pr.tpot_s, s.decode_high = pr.tpot_hi_s / pr.tpot_s;
  s.prefill_low = pr.ttft_lo_s / pr.ttft_s, s.prefill_high = pr.ttft_hi_s / pr.ttft_s;
  return s;
}

ServeRange serve_range(StepCosts& costs, const PolicyChoice& pc, const ServingSpec& spec,
                       const std::vector<Request>& requests) {
  ServeRange r;
  r.steps = step_range(costs.deployment(), pc, requests);
  if (!r.steps.known) return r;
  r.run = true;
  // The same tables at each end: the exact steps already computed for the estimate's run are reused.
  costs.scale_times(r.steps.decode_low, r.steps.prefill_low);
  r.low = run_serving(costs, *pc.policy, spec, requests, false).summary;
  costs.scale_times(r.steps.decode_high, r.steps.prefill_high);
  r.high = run_serving(costs, *pc.policy, spec, requests, false).summary;
  costs.scale_times(1, 1);
  return r;
}

nlohmann::json serve_range_json(const ServeRange& r) {
  using nlohmann::json;
  if (!r.run) return json(nullptr);
  auto end = [](const ServeSummary& s) {
    return json{{"ttft_p99_s", s.ttft.p99}, {"tpot_p99_s", s.tpot.p99}, {"throughput_tok_s", s.throughput_tok_s},
                {"goodput_rate", s.goodput_rate}, {"overloaded", s.overloaded}};
  };
  return json{{"step_time", {{"decode_low", r.steps.decode_low}, {"decode_high", r.steps.decode_high},
                             {"prefill_low", r.steps.prefill_low}, {"prefill_high", r.steps.prefill_high}}},
              {"low_end", end(r.low)},
              {"high_end", end(r.high)}};
}

}  // namespace kvsim::serve
