// oracle: the two faces and the budget axis of the test-only policy the registry lists when built
// with KVSIM_EXAMPLE_POLICY (tests/example_policy/README.md).
#pragma once
#include <cstdint>
#include <memory>

#include "model/policy.hpp"
#include "traces/select/selector.hpp"

namespace kvsim::policies::oracle {

const Policy& cost_model();
std::unique_ptr<replay::TraceSelector> make_selector(const ParamValues& p);
bool set_budget(ParamValues& v, int64_t prompt, int64_t budget);

}  // namespace kvsim::policies::oracle
