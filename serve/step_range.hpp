// The plan's 80% range (model/uncertainty.hpp) carried to a serving run: the factors on its decode and
// prefill step times, read at the workload's median request at the largest batch that fits. `kvsim
// serve` reports them beside each policy's result; `kvsim capacity` sizes at their high end by default.
#pragma once
#include <vector>

#include <nlohmann/json.hpp>

#include "model/deployment.hpp"
#include "model/scenario.hpp"
#include "serve/serve.hpp"
#include "serve/step_costs.hpp"
#include "serve/workload.hpp"

namespace kvsim::serve {

struct StepRange {
  bool known = false;  // false: no request, or the median request does not fit (then all 1)
  double decode_low = 1, decode_high = 1, prefill_low = 1, prefill_high = 1;
};

StepRange step_range(const Deployment& d, const PolicyChoice& pc, const std::vector<Request>& requests);

// A serving run's range: the same run again with every step time at the low end of its range and at the
// high end (queueing turns a step-time range into a wider latency range, so the ends are simulated,
// not scaled). `run` false when the step range is unknown.
struct ServeRange {
  StepRange steps;
  bool run = false;
  ServeSummary low, high;  // the summaries at the low and the high step times
};
// `costs` are the tables the estimate's run used (their deployment, pc's policy and parameters); their
// time scale is back at 1 on return.
ServeRange serve_range(StepCosts& costs, const PolicyChoice& pc, const ServingSpec& spec,
                       const std::vector<Request>& requests);
// `{"step_time": {decode_low, decode_high, prefill_low, prefill_high}, "low_end": {...}, "high_end":
// {...}}` with each end's ttft_p99_s, tpot_p99_s, throughput_tok_s and goodput_rate; null when unknown.
nlohmann::json serve_range_json(const ServeRange& r);

}  // namespace kvsim::serve
