// oracle: the faces of the test-only policy that kvsim-example-policy's registry table lists
// (tests/example_policy/table.cpp, tests/example_policy/README.md).
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
