// Evaluating a generated scenario through the library's own calls (model/plan.hpp), for the properties.
#pragma once
#include <algorithm>
#include <cmath>
#include <memory>

#include "model/plan.hpp"
#include "tests/properties/scenario_gen.hpp"

namespace kvsim::props {

// A scenario and its deployment, which points into it (hence held together, not moved).
struct Loaded {
  Scenario s;
  Deployment d;
  explicit Loaded(const ScenarioSpec& spec) : s(load(spec)), d(make_deployment(s)) {}
  const Policy& policy() const { return *s.policies.front().policy; }
  const ParamValues& params() const { return s.policies.front().params; }
  // The design point of the scenario's one policy at `context` and `batch` (0: the largest that fits).
  PlanResult evaluate_at(int64_t context, int64_t batch) const {
    return evaluate({.deployment = &d, .policy = &policy(), .params = &params(), .context_tokens = context,
                     .output_tokens = s.workload.output_tokens, .batch = batch});
  }
  PlanResult evaluate_at(int64_t context, int64_t batch, const ParamValues& values) const {
    return evaluate({.deployment = &d, .policy = &policy(), .params = &values, .context_tokens = context,
                     .output_tokens = s.workload.output_tokens, .batch = batch});
  }
};
inline std::unique_ptr<Loaded> loaded(const ScenarioSpec& spec) { return std::make_unique<Loaded>(spec); }

// a <= b up to the rounding of sums of a few thousand doubles.
inline bool le(double a, double b) { return a <= b + 1e-9 * std::max(std::abs(a), std::abs(b)); }
inline bool near(double a, double b, double rel = 1e-9) {
  return std::abs(a - b) <= rel * std::max(std::abs(a), std::abs(b));
}

}  // namespace kvsim::props
