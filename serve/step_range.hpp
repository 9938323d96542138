// The plan's 80% range (model/uncertainty.hpp) carried to a serving run: the factors on its decode and
// prefill step times, read at the workload's median request at the largest batch that fits. `kvsim
// serve` reports them beside each policy's result; `kvsim capacity` sizes at their high end by default.
#pragma once
#include <vector>

#include "model/deployment.hpp"
#include "model/scenario.hpp"
#include "serve/workload.hpp"

namespace kvsim::serve {

struct StepRange {
  bool known = false;  // false: no request, or the median request does not fit (then all 1)
  double decode_low = 1, decode_high = 1, prefill_low = 1, prefill_high = 1;
};

StepRange step_range(const Deployment& d, const PolicyChoice& pc, const std::vector<Request>& requests);

}  // namespace kvsim::serve
